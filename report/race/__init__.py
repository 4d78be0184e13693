"""The report's race section (plan `search:`, docs/race.md): per raced phase the rule, each
level's decision with its interval, who was dropped in which round and why, the guarantee in
words and the device time spent against the grid's, and a chart of the race. It reads
race_rounds, race_decisions and race_cost (analyze.race) as :mod:`report.data` loads them;
:mod:`report.race.section` is what the report's figures, context, HTML page and findings call,
:mod:`report.race.figure` draws the chart.
"""
