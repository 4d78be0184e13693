"""The `specsweep` console command: one entry point over the three stages.

`specsweep run|check|simulate|provision|import` are collect's commands, `analyze|compare|gate|
export` analyze's, `report` report's, and `sql` opens the duckdb CLI on a results file. The
commands forward their arguments to each stage's own command line (`specsweep|analyze|
report` keep working, with the same options and exit codes); nothing here holds stage logic.
Below the stages, what every command shares: how it stops on a signal (`interrupt`) and how it
writes files for its user (`writing`).
"""
