"""Copy on write in the scratch working folder: a run never writes into the user's files.

verify starts each run in a scratch folder whose files are symbolic links to the user's own
(inputs stay reachable, nothing is copied up front). Opening such a link for writing would
write through it into the original, so `open` / `io.open` are wrapped (through the Patcher,
guarded): before a link inside the scratch folder (DISTLINT_VERIFY_SCRATCH) is opened to write,
it is replaced by a file of the scratch folder's own, a copy of the original when the mode keeps
the content ("a", "r+"). Writes that do not go through open() (os.open, native libraries) are
not seen, except torch.save and safetensors' save_file, which write by name in native code and
are wrapped too: verify compares the originals' size and time afterwards and names any that changed.
"""

import builtins
import io
import json
import os
import shutil

from distlint_probe_schema import ENV_OUT, ENV_SCRATCH, ENV_USER_DIR, WRITES_SUFFIX

WRITE = set("wax+")


class CopyOnWrite:
    def __init__(self, patcher, note, root=None):
        self.p = patcher
        self.note = note
        root = root if root is not None else os.environ.get(ENV_SCRATCH, "")
        self.root = os.path.abspath(root) if root else ""
        user = os.environ.get(ENV_USER_DIR, "")
        self.user = os.path.realpath(user) if user else ""
        # verify's own folder (records, logs, both scratch copies: `--keep DIR` may be inside
        # the user's folder): never a write of the script's into the user's tree
        out = os.environ.get(ENV_OUT, "")
        self.out = out
        self.work = os.path.dirname(os.path.dirname(os.path.realpath(out))) if out else ""
        self.busy = False
        self.copied = []
        self.outside = set()  # paths of the user's folder opened to write (noted once each)

    def install(self):
        if not self.root:
            return
        self.p.wrap(builtins, "open", "open (copy on write)", before=self.before_open)
        if io.open is not builtins.open:  # io.open is the original builtin: pathlib uses it
            self.p.wrap(io, "open", "io.open (copy on write)", before=self.before_open)

    def wrap_saver(self, owner, attr, label, index, keyword):
        """A function that writes the file named by its argument `index` / `keyword` itself, in
        native code (torch.save's zip writer, safetensors): the link goes before it writes."""
        if not self.root:
            return

        def before(args, kwargs):
            target = args[index] if len(args) > index else kwargs.get(keyword)
            self.replace_link(target, "w")

        self.p.wrap(owner, attr, label, before=before)

    def before_open(self, args, kwargs):
        file = args[0] if args else kwargs.get("file")
        mode = args[1] if len(args) > 1 else kwargs.get("mode", "r")
        self.replace_link(file, mode)
        return None

    def note_outside(self, path):
        """A write aimed into the user's own folder, past the scratch copy (an absolute path,
        or a folder of the copy that links to the user's): noted, so that verify can say which
        run wrote a file it finds changed there (`<pid>.writes` beside the records). The write
        itself is not stopped."""
        if not self.user or self.busy or path in self.outside:
            return
        folder, name = os.path.split(path)
        real = os.path.join(os.path.realpath(folder), name)
        if not real.startswith(self.user + os.sep):
            return
        if self.work and real.startswith(self.work + os.sep):
            return
        self.outside.add(path)
        if not self.out:
            return
        # A file of its own per process, beside the records: any process of the run (a rank,
        # a DataLoader worker, a helper that never becomes a rank) can write one.
        line = {
            "pid": os.getpid(),
            "rank": os.environ.get("RANK"),
            "path": os.path.relpath(real, self.user),
        }
        self.busy = True  # this write is verify's
        try:
            with open(os.path.join(self.out, f"{os.getpid()}{WRITES_SUFFIX}"), "a") as f:
                f.write(json.dumps(line) + "\n")
        except OSError:
            pass
        finally:
            self.busy = False

    def replace_link(self, file, mode):
        if self.busy or not isinstance(file, (str, bytes, os.PathLike)):
            return
        if not isinstance(mode, str) or not WRITE & set(mode):
            return
        path = os.path.abspath(os.fsdecode(file))
        self.note_outside(path)
        if not path.startswith(self.root + os.sep) or not os.path.islink(path):
            return
        original = os.path.realpath(path)
        if not os.path.isfile(original):
            return
        self.busy = True
        try:
            os.unlink(path)
            if "a" in mode or "+" in mode:
                shutil.copy2(original, path)  # the mode keeps the content: start from a copy
        finally:
            self.busy = False
        self.copied.append(path)
        self.note(f"copy on write: {os.path.relpath(path, self.root)} (your file is untouched)")
