"""fsscope: a terminal investigator for Linux file-system performance.

The engine (everything except ``fsscope.tui`` and ``fsscope.cli``) imports neither
Textual nor Rich, so it can be scripted, tested and run in job child processes alone.
"""

__version__ = "0.1.0"
