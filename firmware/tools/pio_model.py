"""PlatformIO extra script: compile the model's generated snapuq_model.c (custom_snapuq_model,
default models/digits) into the firmware and put its directory on the include path."""

import os

Import("env")  # noqa: F821  (SCons)

model = env.GetProjectOption("custom_snapuq_model", "models/digits")  # noqa: F821
model_dir = os.path.join(env.subst("$PROJECT_DIR"), model)  # noqa: F821
if not os.path.exists(os.path.join(model_dir, "snapuq_model.c")):
    raise SystemExit(f"snapuq: {model_dir}/snapuq_model.c missing: run `snapuq export {model}` first")
env.Append(CPPPATH=[model_dir])  # noqa: F821
env.BuildSources(os.path.join("$BUILD_DIR", "snapuq_model"), model_dir, src_filter="+<snapuq_model.c>")  # noqa: F821
