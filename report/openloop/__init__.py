"""The report's open-loop part: the section (:mod:`report.openloop.section`: the rate-limits
table, the sentences, the figure jobs) and its charts (:mod:`report.openloop.figures`)."""
