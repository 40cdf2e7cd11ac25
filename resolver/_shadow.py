"""A user's own `probes.py` (or `probes/` package) that hides cluster-topology's `probes` package.

`probes` is a top-level package (the design fixes its name), and Python searches `sys.path` in
order: the script's folder first, or for `python -c`, `python -m` and the interactive shell the
working directory (https://docs.python.org/3/library/sys_path_init.html). A `probes.py` there is
imported in place of ours, and the first `from probes import live` would fail with "'probes' is not
a package". `resolver._detect.require_probes` (the one check, called before every run-time import of
`probes`) finds it by the mark our package carries
(`probes.__distribution__`), and raises `ProbesShadowed` from here: this
module is imported only then, so a normal start-up pays nothing for it.
"""

from __future__ import annotations

import os
from types import ModuleType

from resolver.errors import TopologyError

__all__ = ["ProbesShadowed"]


class ProbesShadowed(TopologyError, ImportError):
    """The `probes` module Python imported is not cluster-topology's: a file or folder of that name,
    earlier on `sys.path`, shadows it.

    An `ImportError` (with `name` "probes" and `path` the file that was imported) and a
    `TopologyError`, so the command line reports it in one line. `value` is the shadowing file or
    folder, `expected` says where cluster-topology's package is.
    """

    def __init__(self, found: str, ours: str | None) -> None:
        self.variable = "probes"
        self.value = found
        where = f" ({ours})" if ours else ""
        self.expected = f"cluster-topology's probes package{where}"
        message = (
            f"the module 'probes' that Python imported is {found}, not {self.expected}: "
            f"{found} comes earlier on sys.path and shadows it (Python puts the script's folder, or for "
            "python -c, python -m and the interactive shell the working directory, first on sys.path). "
            f"HINT: rename {found} (cluster-topology's package has the name probes), or start Python "
            "from another folder; with Python 3.11 or later, python -P (or PYTHONSAFEPATH=1) keeps that "
            "folder off sys.path"
        )
        super().__init__(message, name="probes", path=found)

    @classmethod
    def of(cls, module: ModuleType) -> ProbesShadowed:
        """The error for `module`, the `probes` that was imported instead of ours."""
        return cls(_where(module), _ours())


def _where(module: ModuleType) -> str:
    """The file or folder the user would rename: `probes.py`, or the folder of a `probes/__init__.py`."""
    file = getattr(module, "__file__", None)
    if not isinstance(file, str):
        return repr(module)  # no file behind it (put in sys.modules by hand): its repr says what it is
    if os.path.splitext(os.path.basename(file))[0] == "__init__":
        return os.path.dirname(file)
    return file


def _ours() -> str | None:
    """Where cluster-topology's package is: `probes/` beside `resolver/`, as the distribution installs
    them; None if it is not there (an unusual install), so that the message claims no place."""
    folder = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "probes")
    return folder if os.path.isfile(os.path.join(folder, "__init__.py")) else None
