"""distlint verify probe: records what each rank of a training script really did.

`distlint verify` puts this folder first on PYTHONPATH, so Python imports this module at start-up
in every process of the run. It does nothing unless DISTLINT_VERIFY_OUT is set, and it imports
nothing beyond the standard library: torch, numpy and accelerate are patched only when the script
imports them (an import hook wraps the modules right after they load). Any other sitecustomize
further down sys.path still runs.

The probe is split along its seams, one module each (all in this folder):
  distlint_probe_schema         the versioned record schema, shared with the reader
  distlint_probe_patching       guarded, recorded, restorable patches
  distlint_probe_recorder       what a rank did (observes only; ends the run after K updates)
  distlint_probe_interventions  the --exact changes (batch x N, the N-process run's LRs)
  distlint_probe_scratch        copy on write: a write to a linked file of the scratch folder
                                replaces the link, never the user's original
  distlint_probe_confirm        what confirms DL204/DL205/DL304/DL401/DL402 (loader passes,
                                sampler orders, gathers, clipping; the --epochs stop)
  distlint_probe_hooks          which functions are wrapped, the import hook, activation
"""

import os
import sys


def _chain_next_sitecustomize():
    """Run the sitecustomize that this one shadows, if there is one."""
    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    try:
        import importlib.machinery
        import importlib.util

        spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
        if spec is None or spec.loader is None:
            return
        if os.path.abspath(spec.origin or "") == os.path.abspath(__file__):
            return
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    except Exception as exc:  # another sitecustomize failing must not break the run
        sys.stderr.write(f"distlint verify: the chained sitecustomize failed: {exc!r}\n")


_chain_next_sitecustomize()
if os.environ.get("DISTLINT_VERIFY_OUT"):
    try:
        from distlint_probe_hooks import activate

        _probe = activate(os.environ["DISTLINT_VERIFY_OUT"])
    except Exception as _exc:  # the probe must never stop the script from running
        sys.stderr.write(f"distlint verify: probe not active: {_exc!r}\n")
