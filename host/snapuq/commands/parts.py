"""`snapuq parts DIR [--write]`: the parts of a model directory and whether they belong together.

    snapuq parts models/digits           # one line per part: ok, or why a consumer refuses it; exit 1 if any
    snapuq parts models/digits --write   # record DIR/MANIFEST.sha256 for a directory without one

Every writer (`snapuq train`, `export`, `calibrate`, `micropython blob`) records the sha256 of each part it
writes, and of the parts it was made from, in DIR/MANIFEST.sha256 (snapuq.modeldir); every consumer refuses a
part that no longer matches (snapuq.modeldir.check_parts). A directory written by an older snapuq has no
record: consumers take its parts as they are, with a one-line note. `--write` is the migration: it checks
what can be checked without converting again (snapuq.json vs model_int8.tflite, its SNAP constants vs what
calib.json gives, snapuq_model.{c,h} and model.snapuq vs what this snapuq writes from snapuq.json and the
.tflite) and records the parts as made from each other. model.keras -> model_int8.tflite cannot be checked
without converting again: it is taken as it is (`snapuq export DIR` makes the whole record from scratch).
In a directory that has a record, `--write` records a deliberately edited config.json; every other part must
match its record.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from snapuq.errors import SnapuqError
from snapuq.export.cgen import header_snap_sha256, write_c_model
from snapuq.export.fixedpoint import build_snap
from snapuq.export.manifest import check_manifest, load_manifest
from snapuq.formats import read_calib
from snapuq.io import write_text
from snapuq.modeldir import (
    MADE_FROM,
    ModelPaths,
    Part,
    commit_lock,
    format_parts,
    part_problem,
    read_parts,
    sha256_file,
)
from snapuq.native.blob import snap_sha256, write_blob


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("dir", type=Path, metavar="DIR", help="model directory")
    p.add_argument("--write", action="store_true",
                   help="check the parts against each other and record DIR/MANIFEST.sha256 (a directory "
                   "written by an older snapuq; or after a deliberate edit of config.json)")


def content_problems(d: Path) -> list[str]:
    """What the parts' contents say about each other, one line each (empty: nothing found)."""

    paths = ModelPaths(d)
    if not (paths.int8.is_file() and paths.manifest.is_file()):
        return []
    out: list[str] = []
    tfl = paths.int8.read_bytes()
    man = load_manifest(d)
    try:
        model = check_manifest(man, tfl, str(paths.manifest))
    except SnapuqError as e:
        return [f"{e}; run `snapuq export {d}`"]
    if paths.calib.is_file():
        calib = read_calib(paths.calib)
        inp = model.inputs[0]
        qin = {"scale": float(inp.scale), "zero_point": int(inp.zero_point),
               "shape": [int(v) for v in inp.shape]}  # fmt: skip
        outs = model.output_map()
        snap = build_snap(calib, outs, inp=qin)  # what `snapuq export` writes (snapuq.commands.export)
        want = {"snap": snap, "snap_variants": {v: build_snap(calib, outs, variant=v, inp=qin)
                                                for v in calib.get("variants") or {} if v != snap["variant"]}}
        got = {"snap": man.get("snap"), "snap_variants": man.get("snap_variants") or {}}
        if json.loads(json.dumps(want)) != got:
            out.append(f"{paths.manifest}: its SNAP constants are not the ones {paths.calib} gives (made "
                       f"from another calib.json); run `snapuq export {d}`")
    with tempfile.TemporaryDirectory() as td:
        c, h = write_c_model(td, man, tfl)
        if paths.c_source.is_file() and paths.c_source.read_text(errors="replace") != c.read_text():
            out.append(f"{paths.c_source}: not what `snapuq export` makes from {paths.manifest} and "
                       f"{paths.int8}; run `snapuq export {d}`")
        if paths.c_header.is_file():
            mine = {ln for ln in h.read_text().splitlines() if ln.startswith("#define SNAPUQ_MODEL_")}
            theirs = [ln for ln in paths.c_header.read_text(errors="replace").splitlines()  # an older
                      if ln.startswith("#define SNAPUQ_MODEL_")  # snapuq's header has fewer: each as now
                      and not ln.startswith("#define SNAPUQ_MODEL_OPS")]
            sha = header_snap_sha256(paths.c_header)
            if (sha is not None and sha != snap_sha256(man)) or not set(theirs) <= mine:
                out.append(f"{paths.c_header}: its definitions are not the ones {paths.manifest} gives; "
                           f"run `snapuq export {d}`")
    if paths.blob.is_file() and paths.blob.read_bytes() != write_blob(tfl, man):
        out.append(f"{paths.blob}: not the blob of {paths.int8} and {paths.manifest}; "
                   f"run `snapuq micropython blob {d}`")
    return out


def status(d: Path) -> tuple[dict[str, Part] | None, list[tuple[str, str | None]]]:
    """(the record, [(part, problem or None)]) for every part present or recorded."""
    rec = read_parts(d)
    names = [n for n in MADE_FROM if (d / n).is_file() or (rec and n in rec)]
    sha: dict[str, str | None] = {}
    return rec, [(n, part_problem(d, rec, n, sha) if rec is not None else None) for n in names]


def write(d: Path) -> dict[str, Part]:
    rec, rows = status(d)
    bad = [why for n, why in rows if why and not (n == ModelPaths.CONFIG and "changed since" in why)]
    if bad:
        raise SnapuqError(bad[0])
    probs = content_problems(d)
    if probs:
        raise SnapuqError(probs[0])
    sha = {n: sha256_file(d / n) for n, _ in rows if (d / n).is_file()}
    new = {}
    for n in sha:
        if rec is not None and n in rec and n != ModelPaths.CONFIG:
            new[n] = rec[n]
        else:
            new[n] = Part(sha[n], {a: sha[a] for a in MADE_FROM[n] if a in sha})
    with commit_lock(d.parent):
        write_text(ModelPaths(d).parts, format_parts(new))
    return new


def run(args: argparse.Namespace) -> int:
    d = args.dir
    if not d.is_dir():
        raise SnapuqError(f"{d}: no such model directory")
    if args.write:
        new = write(d)
        print(f"wrote {ModelPaths(d).parts}: {len(new)} parts ({', '.join(new)})")
        return 0
    rec, rows = status(d)
    if rec is None:
        print(f"{d}: no {ModelPaths.PARTS} (written by an older snapuq): its parts are taken as they are; "
              f"`snapuq parts {d} --write` checks and records them")
        for n, _ in rows:
            print(f"  {n:<20} {sha256_file(d / n)[:16]}  not recorded")
        return 0
    for n, why in rows:
        print(f"  {n:<20} {'ok' if why is None else why}")
    bad = sum(why is not None for _, why in rows)
    print(f"{d}: {len(rows) - bad}/{len(rows)} parts ok")
    return 1 if bad else 0
