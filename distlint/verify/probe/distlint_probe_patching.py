"""Guarded patches: how the probe wraps a function of torch / accelerate / numpy / random.

Every patch goes through `Patcher.wrap`, which
- installs nothing when the attribute is missing, not callable, already wrapped by the probe, or
  left out by DISTLINT_VERIFY_NO_PATCH (each recorded with its reason);
- keeps the original reachable (``__wrapped__``) and restorable (`Patcher.restore`);
- builds wrappers whose probe code runs under `guard`: an error in the probe is written once as a
  note and never reaches the user's code, while the original function is called with exactly the
  arguments it was given and its result or exception passes through untouched.
"""

import functools
import os
import sys

from distlint_probe_schema import ENV_NO_PATCH


class Patcher:
    def __init__(self, note):
        self.note = note  # note(message): how probe errors are reported
        self.applied = []
        self.skipped = {}
        self.originals = []  # (owner, attr, original)
        self.left_out = {
            s.strip() for s in os.environ.get(ENV_NO_PATCH, "").split(",") if s.strip()
        }
        self._reported = set()

    def guard(self, label, func, *args, **kwargs):
        """Run probe code; never let it raise into the user's code."""
        try:
            return func(*args, **kwargs)
        except Exception as exc:
            if label not in self._reported:
                self._reported.add(label)
                try:
                    self.note(f"probe error in {label}: {exc!r}")
                except Exception:
                    pass
            return None

    def wrap(self, owner, attr, label, before=None, after=None, replace=None):
        """Wrap owner.attr.

        before(args, kwargs) runs first (guarded); its result, if not None, is a pair (args,
        kwargs) to call the original with (only the --exact interventions use that).
        after(result, args, kwargs) runs after a normal return (guarded).
        replace(original) -> function builds the whole wrapper instead (it must call the original
        and guard its own probe code).
        """
        if label in self.left_out:
            self.skipped[label] = "left out by " + ENV_NO_PATCH
            return False
        original = getattr(owner, attr, None)
        if original is None:
            self.skipped[label] = "not found"
            return False
        if not callable(original):
            self.skipped[label] = "not callable"
            return False
        if getattr(original, "_distlint", False):
            self.skipped[label] = "already wrapped"
            return False
        if replace is not None:
            wrapper = replace(original)
        else:
            patcher = self

            def wrapper(*args, **kwargs):
                if before is not None:
                    changed = patcher.guard(label, before, args, kwargs)
                    if changed is not None:
                        args, kwargs = changed
                result = original(*args, **kwargs)
                if after is not None:
                    patcher.guard(label, after, result, args, kwargs)
                return result

        try:
            functools.update_wrapper(wrapper, original)
        except Exception:
            pass
        wrapper._distlint = True
        wrapper.__wrapped__ = original
        try:
            setattr(owner, attr, wrapper)
        except Exception as exc:
            self.skipped[label] = f"cannot set: {exc!r}"
            return False
        self.originals.append((owner, attr, original))
        self.applied.append(label)
        return True

    def restore(self):
        """Put every original back (newest first)."""
        while self.originals:
            owner, attr, original = self.originals.pop()
            try:
                setattr(owner, attr, original)
            except Exception:
                sys.stderr.write(f"distlint verify: could not restore {attr}\n")
