"""Names no code of the repository uses that are kept on purpose (vulture reads this file as a user of them).

Each entry says why it is not dead. Framework hooks (validators, typer commands, HTMLParser handlers, IPython's
``_repr_*_``) are ignored by ``[tool.vulture]`` in pyproject.toml instead. ``tests/test_architecture.py``
(``test_no_dead_code``) runs vulture; a name added here should be public API a user calls, not code no one does.
"""

from storagebench import display
from storagebench._store import StudyStore

KEPT_FOR_USERS = [
    StudyStore.report_path,  # the layout's third path beside raw_dir/tidy_dir (docs/ARCHITECTURE.md, _store.py)
    display.reset_figure_numbers,  # a notebook re-run in one kernel numbers its figures from 1 again
]
