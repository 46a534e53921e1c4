"""fio knowledge, the ground floor of storagebench: nothing here imports the rest of the package.

``options``
    fio 3.33's option list and aliases, size and time grammar (``parse_size(kb_base)``,
    ``parse_time``), the data directions, and the rules of what an option does to the host
    (runs a program, writes, touches other paths, the network).
``hosts``
    fio's host grammar (``--client``/``--server`` addresses, host files).
``process``
    find fio, read its version, spawn it in a session of its own so that nothing it forks outlives
    storagebench (its workers call ``setsid()``: they are told by their command line, and a
    watchdog kills them when storagebench dies), wait on it, stop every process of a run (its parts:
    ``_proc`` fio's binary and processes in ``/proc``, ``_records`` a run's record and the stale run it
    names, ``_output`` what fio said).
"""
