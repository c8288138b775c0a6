"""`snapuq tokens eval --dataset NAME --out RDIR`: Uncert token pruning/merging in a tiny spiking
transformer (`--arch flat`: one reduction point; `--arch hier`: QKFormer-style stages with token
downsampling, reduction at every stage, resumable training); tokens.json, tokens.md and PNG plots in RDIR."""

from __future__ import annotations

import argparse

from snapuq.errors import SnapuqError
from snapuq.io import check_out_dir
from snapuq.tokens.evaluate import run_eval
from snapuq.tokens.hier_eval import run_eval_hier


def _rhos(s: str) -> list[float]:
    try:
        v = [float(x) for x in s.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"keep ratios must be comma-separated numbers, got '{s}'") from None
    if not v or any(not 0.0 < r <= 1.0 for r in v):
        raise argparse.ArgumentTypeError(f"keep ratios must lie in (0, 1], got '{s}'")
    if 1.0 not in v:
        v = [1.0] + v
    return v


def _ints(s: str) -> tuple[int, ...]:
    try:
        v = tuple(int(x) for x in s.split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got '{s}'") from None
    if not v or any(x < 1 for x in v):
        raise argparse.ArgumentTypeError(f"expected integers >= 1, got '{s}'")
    return v


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="tokens_command", metavar="ACTION")
    e = sub.add_parser("eval", help="train the spiking transformer and sweep token reduction")
    e.add_argument("--dataset", required=True, help="digits (embedded), mnist, fashion_mnist, cifar10")
    e.add_argument("--data-dir", default=None, help="where mnist/cifar10 files live")
    e.add_argument("--out", required=True, help="report directory")
    e.add_argument("--arch", choices=("flat", "hier"), default="flat",
                   help="flat: patch tokens and blocks of one width; hier: stem + stages with 2x2 token "
                   "downsampling between them, reduction at every stage")
    e.add_argument("--epochs", type=int, default=None, help="training epochs (the cosine schedule's length; "
                   "default flat 40, hier 100)")
    e.add_argument("--batch", type=int, default=None, help="default flat 128, hier 64")
    e.add_argument("--lr", type=float, default=None, help="peak learning rate (default flat 5e-3, hier 2e-3)")
    e.add_argument("--seed", type=int, default=0)
    e.add_argument("--label-smoothing", type=float, default=0.0, help="compresses the logits, and with them "
                   "the Dirichlet evidence Uncert reads")
    e.add_argument("--dim", type=int, default=32)
    e.add_argument("--depth", type=int, default=2)
    e.add_argument("--heads", type=int, default=2)
    e.add_argument("--T", type=int, default=4, help="time steps")
    e.add_argument("--patch", type=int, default=None, help="patch size (default 2 for 8x8 inputs, else 4)")
    e.add_argument("--block", type=int, default=None, help="block whose attention sees the reduced tokens "
                   "(default: the last)")
    e.add_argument("--lam", type=float, default=0.9, help="λ in S = mean_t U + λ·std_t U")
    e.add_argument("--rhos", type=_rhos, default=[1.0, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4])
    e.add_argument("--random-seeds", type=int, default=3, help="repeats of the random baseline")
    e.add_argument("--rank", type=int, default=16, help="SNAP head rank")
    e.add_argument("--snap-epochs", type=int, default=100)
    e.add_argument("--max-train", type=int, default=12000, help="subsample large training sets")
    e.add_argument("--max-test", type=int, default=2000, help="subsample large dev/test sets")
    e.add_argument("--reuse", action="store_true", help="reuse RDIR/model.weights.h5 when present")
    e.add_argument("--dims", type=_ints, default=None, help="hier: stage widths, e.g. 64,128")
    e.add_argument("--depths", type=_ints, default=None, help="hier: blocks per stage, e.g. 1,2")
    e.add_argument("--stage-heads", type=_ints, default=None, help="hier: attention heads per stage")
    e.add_argument("--stem", type=int, default=32, help="hier: channels of the 3x3 stem conv")
    e.add_argument("--augment", choices=("none", "shift", "crop-flip"), default=None,
                   help="hier: training augmentation (default cifar10 crop-flip, else shift)")
    e.add_argument("--warmup", type=int, default=2, help="hier: warm-up epochs of the cosine schedule")
    e.add_argument("--resume", action="store_true", help="hier: continue RDIR/checkpoint after its last "
                   "finished epoch (same batches and learning rates as an unbroken run)")
    e.add_argument("--stop-after", type=int, default=None, help="hier: stop training once this many epochs "
                   "of the schedule are done (then sweep with those weights; --resume goes on later)")
    e.add_argument("--train-only", action="store_true", help="hier: train (and checkpoint), no sweep")
    e.add_argument("-v", "--verbose", action="store_true", help="show TensorFlow's own log lines")


def run(args: argparse.Namespace) -> int:
    if getattr(args, "tokens_command", None) != "eval":
        raise SnapuqError("usage: snapuq tokens eval --dataset NAME --out RDIR")
    hier = args.arch == "hier"
    for k, flat_v, hier_v in (("epochs", 40, 100), ("batch", 128, 64), ("lr", 5e-3, 2e-3)):
        if getattr(args, k) is None:
            setattr(args, k, hier_v if hier else flat_v)
    if not hier:
        used = [o for o in ("dims", "depths", "stage_heads", "augment", "stop_after") if getattr(args, o)]
        used += [o for o in ("resume", "train_only") if getattr(args, o)]
        if used:
            raise SnapuqError(f"--{used[0].replace('_', '-')} needs --arch hier")
    if args.stop_after is not None and args.stop_after < 1:
        raise SnapuqError(f"--stop-after must be >= 1, got {args.stop_after}")
    if args.stem < 1 or args.warmup < 0:
        raise SnapuqError("--stem must be >= 1 and --warmup >= 0")
    if args.epochs < 1 or args.random_seeds < 1 or args.T < 1:
        raise SnapuqError("--epochs, --random-seeds and --T must be >= 1")
    for opt in ("max_train", "max_test", "batch", "dim", "depth", "heads", "snap_epochs", "rank"):
        v = getattr(args, opt)
        if v < 1:  # 0 used to mean "no limit" for --max-train/--max-test, silently
            raise SnapuqError(f"--{opt.replace('_', '-')} must be >= 1, got {v}")
    if args.patch is not None and args.patch < 1:
        raise SnapuqError(f"--patch must be >= 1, got {args.patch}")
    if not args.lr > 0:
        raise SnapuqError(f"--lr must be > 0, got {args.lr}")

    check_out_dir(args.out)
    if hier:
        if args.block is not None:
            raise SnapuqError("--block is for --arch flat (hier reduces at every stage)")

        rep = run_eval_hier(args)
        if rep.get("train_only"):
            print(f"tokens: trained {rep['epochs_done']} epochs; checkpoint in {args.out}/checkpoint")
            return 0
    else:
        rep = run_eval(args)
    r08 = rep["results"]["prune"]["uncert"].get("0.8")
    msg = f"tokens: full accuracy {100 * rep['accuracy_full']:.2f} %"
    if r08:
        rnd = rep["results"]["prune"]["random"]["0.8"]["acc"]
        msg += f"; Uncert prune ρ=0.8 {100 * r08['acc']:.2f} % (random {100 * rnd:.2f} %)"
    print(msg)
    print(f"tokens: report in {args.out}/tokens.md, tokens.json")
    return 0
