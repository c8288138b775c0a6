import os
import re
import signal
import sys
import time
import uuid

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "host"))
sys.path.insert(0, os.path.join(ROOT, "tests"))  # tests/oracles: independent implementations

# Every process this test session starts inherits this marker (each pytest-xdist worker has its own),
# so the session can find what it left behind even after the process was re-parented.
SESSION_MARK = f"snapuq-test-{uuid.uuid4().hex[:12]}"
os.environ["SNAPUQ_TEST_SESSION"] = SESSION_MARK

WATCHED = ("qemu-system-", "snapuq_fw")


def _processes_of_this_session() -> list[tuple[int, str]]:
    """(pid, command) of live processes that carry this session's marker and look like helpers
    (QEMU, the host firmware)."""
    found = []
    me = os.getpid()
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) == me:
            continue
        try:
            with open(f"/proc/{d}/environ", "rb") as f:
                env = f.read()
            with open(f"/proc/{d}/cmdline", "rb") as f:
                cmd = f.read().split(b"\0")[0].decode(errors="replace")
            with open(f"/proc/{d}/stat", "rb") as f:
                state = f.read().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        if state == b"Z":
            continue  # exited; only waiting to be reaped
        if f"SNAPUQ_TEST_SESSION={SESSION_MARK}".encode() in env.split(b"\0") and \
                any(w in os.path.basename(cmd) for w in WATCHED):
            found.append((int(d), cmd))
    return found


@pytest.fixture(scope="session", autouse=True)
def no_process_left_behind():
    """Fails the session if a QEMU (or host firmware process) started by a test outlives it."""
    yield
    if not os.path.isdir("/proc"):
        return
    deadline = time.monotonic() + 5.0
    left = _processes_of_this_session()
    while left and time.monotonic() < deadline:
        time.sleep(0.2)
        left = _processes_of_this_session()
    for pid, _cmd in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    assert not left, f"processes left running by the test session: {left}"


# ---------------------------------------------------------------- skips that cannot hide a claim
# Under `make test` / `make test-fast` (SNAPUQ_STRICT_SKIPS=1, also when CI is set) a skip is a failure
# unless its reason is one of these: data that is not part of the checkout, or a variant of the machine
# or interpreter that another test covers. A missing compiler, QEMU, MicroPython interpreter, libFuzzer
# runtime, the TFLM oracle or a shipped model therefore fails the run instead of turning "0 differing
# elements" into a skip while the suite exits 0. tools/setup.sh installs every tool these tests need.
ALLOWED_SKIPS = (
    re.compile(r"real data sets? not present"),         # ../shared/data (never committed)
    re.compile(r"tfds installed"),                        # the no-tfds error path
    re.compile(r"the interpreter's snapuq is the C module"),  # twin-only tests under a C-module build
    re.compile(r"the CPU has no FMA unit|x86-64"),      # checks of x86-64 code generation
    re.compile(r"SNAPUQ_MICROPYTHON_C .* not set"),       # a MicroPython build from outside the checkout
)


def _strict_skips() -> bool:
    return os.environ.get("SNAPUQ_STRICT_SKIPS", "") not in ("", "0") or \
        os.environ.get("CI", "").lower() not in ("", "0", "false")


def _skip_reason(rep) -> str:
    lr = rep.longrepr
    return str(lr[2]) if isinstance(lr, tuple) and len(lr) == 3 else str(lr)


def _refuse_skip(rep) -> None:
    if not (rep.skipped and _strict_skips() and not hasattr(rep, "wasxfail")):
        return
    reason = _skip_reason(rep)
    if any(a.search(reason) for a in ALLOWED_SKIPS):
        return
    rep.outcome = "failed"
    rep.longrepr = (f"skipped under SNAPUQ_STRICT_SKIPS / CI, where everything this test needs is installed "
                    f"(tools/setup.sh): {reason}")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    out = yield
    _refuse_skip(out.get_result())


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    out = yield
    _refuse_skip(out.get_result())


# ---------------------------------------------------------------- lanes
# `make test-fast` runs `-m "not slow and not qemu and not train"`: unit tests, the C core against TFLM
# (host, sanitizers) and the MicroPython twin. The lane of the longer tests is kept here, by node id
# prefix (path relative to tests/), so it stays one table (measured under load on 2 cores: a test over
# ~10 s is slow). Tests may also carry the markers themselves.
LANES = {
    "qemu": (
        "e2e/",
        "host/test_vectors.py::test_core_on_qemu",
        "host/test_c_kernels.py::test_dsp_kernels_equal_reference_on_qemu",
        "host/test_tokens_qemu.py",
    ),
    "train": (
        "host/test_reproduce.py", "host/test_recipe.py", "host/test_train.py", "host/test_model_classes.py",
        "host/test_tokens_eval.py", "host/test_tokens_hier.py", "host/test_byom_e2e.py",
        "host/test_byom_eval.py",
        "host/test_snap_lowrank.py", "host/test_eval_ood_sets.py", "host/test_model_transactions.py",
        "host/test_keywords.py", "host/test_keywords12.py", "host/test_baselines.py", "host/test_capacity.py",
        "host/test_byom_api.py::test_attach_fit_on_tf_dataset_and_explicit_taps",
        "host/test_byom_api.py::test_binary_sigmoid_output_becomes_two_class_logits",
        "host/test_byom_api.py::test_leading_rescaling_and_normalization_move_into_the_data_path",
        "host/test_bad_inputs_more.py::test_train_model_holds_the_converter_dump",
    ),
    "slow": (
        "host/test_shipped_real_models.py", "host/test_real_data.py", "host/test_c_fuzz.py",
        "host/test_fuzz_blob.py", "host/test_tfquiet.py", "host/test_c_cross.py", "host/test_link_faults.py",
        "host/test_firmware_sha256.py", "host/test_protocol.py", "host/test_c_e2e.py",
        "host/test_eval_digits.py", "host/test_eval.py", "host/test_export.py", "host/test_bench_table.py",
        "host/test_blob_cross.py", "host/test_c_sizes_doc.py", "host/test_input_path.py",
        "host/test_energy_ppk2.py",
        "host/test_bad_files.py::test_resume_keeps_only_lines_that_check_out",
        "host/test_bad_inputs_more.py::test_refused_with_the_shipped_model[bench",
        "host/test_vectors.py::test_twin_under_micropython",
        "host/test_micropython_twin_kernels.py::test_twin_interpreter_matches_tflm[resnet8]",
        "host/test_bad_inputs.py::test_bad_invocations_one_line_each",
        "host/test_micropython_blob.py::test_c_blob_reader_under_sanitizers",
        "host/test_micropython_blob.py::test_normalization_is_not_fused_whatever_the_compiler_flags",
        "host/test_c_optable.py::test_restricted_host_image_refuses_another_operator_in_one_line",
        "host/test_c_optable.py::test_resnet8_small_mcu_image_links_only_its_operators",
    ),
}


def pytest_collection_modifyitems(config, items):
    tests_dir = os.path.join(ROOT, "tests")
    for item in items:
        rel = os.path.relpath(str(item.path), tests_dir).replace(os.sep, "/")
        node = rel + item.nodeid[item.nodeid.find("::"):] if "::" in item.nodeid else rel
        for lane, prefixes in LANES.items():
            if node.startswith(prefixes):
                item.add_marker(lane)
