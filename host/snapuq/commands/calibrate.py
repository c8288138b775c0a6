"""`snapuq calibrate D`: refit D/calib.json (p_err, alarm, hinge) on the dev split without retraining, and
refresh the export when D has one (snapuq.uq.calibration holds the fit)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from snapuq.commands.export import export_model
from snapuq.commands.flags import add_options, given
from snapuq.data import dataset_of
from snapuq.errors import SnapuqError
from snapuq.evaluation.loading import load
from snapuq.formats import read_calib, validate_calib
from snapuq.io import write_json
from snapuq.modeldir import ModelPaths, PartsUpdate
from snapuq.options import CalibOptions
from snapuq.uq.calibration import best_variant, calibrate, check_line


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("model_dir", metavar="DIR", help="model directory written by `snapuq train`")
    p.add_argument("--data-dir", default=None, help="folder with the dataset files (non-embedded datasets)")
    add_options(p, CalibOptions, variant=None)  # --variant not given: keep DIR's
    p.add_argument("--no-export", action="store_true", help="do not refresh an existing int8 export")


def run(args: argparse.Namespace) -> int:
    CalibOptions(**given(CalibOptions, args))  # the options' one-line errors before the model loads
    d = Path(args.model_dir)
    paths = ModelPaths(d)
    md = load(d, calib=False)  # the calibration this command replaces may be the broken one

    # calib.json and the export refreshed from it are one unit: staged, swapped in together, recorded in
    # MANIFEST.sha256; a failure anywhere (the fit, the export, a full disk) leaves DIR as it was
    with PartsUpdate(d) as up:
        return _recalibrate(args, d, paths, md, up)


def _recalibrate(args: argparse.Namespace, d: Path, paths: ModelPaths, md, up) -> int:
    cfg = md.config
    old = None
    if paths.calib.exists():
        try:
            old = read_calib(paths.calib, cfg)
        except SnapuqError as e:
            print(f"snapuq calibrate: warning: {e}; replacing it", file=sys.stderr)
    variant = args.variant or str((old or {}).get("variant", cfg.get("variant", "best")))
    ds = dataset_of(cfg, args.data_dir)
    opts = CalibOptions(**{**given(CalibOptions, args), "variant": variant})
    calib = calibrate(md.predict, cfg, ds.x_dev, ds.y_dev, opts, seed=int(cfg.get("seed", 0)),
                      x_ref=getattr(ds, "x_train", None), y_ref=getattr(ds, "y_train", None))

    validate_calib(calib, f"{paths.calib} (refitted, not written)", cfg)  # what export and eval would refuse
    write_json(ModelPaths(up.path).calib, calib, indent=1)
    best = best_variant(calib)
    fit = best["fit"]
    print(
        f"snapuq calibrate: {paths.calib}: hinge quantile {best['hinge']['quantile']}, alarm rate "
        f"{best['hinge'].get('alarm_rate') or 0:g} (q {best['hinge']['q_over_largest_sd']:+.2f} sd over the "
        f"largest of {best['hinge']['n_ref']} clean references) "
        f"(tried {', '.join(str(t['quantile']) for t in fit['hinge_quantiles_tried'])}), alarm k "
        f"{best['alarm']['k']:.3g}, dev ECE(p_err) {fit['dev_ece_p_err']:.4f}"
    )
    print(f"snapuq calibrate: {check_line(fit['dev_check'])}")
    if not fit["dev_check"]["ok"]:
        print(f"snapuq calibrate: warning: {fit['dev_check']['hint']}")
    if paths.manifest.exists() and not args.no_export:
        print(f"snapuq calibrate: {d}: refreshing the int8 export with the new constants")
        export_model(d, data_dir=args.data_dir, calib=calib, update=up)  # (and the blob D holds)
    up.commit()
    if paths.manifest.exists() and args.no_export:
        print(f"snapuq calibrate: note: the int8 export in {d} was made from the previous calib.json: it is "
              f"refused until `snapuq export {d}`")
    return 0 if fit["dev_check"]["ok"] else 1
