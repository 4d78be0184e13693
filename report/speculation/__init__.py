"""The report's section on speculation's knobs: what each method's parameters do, why a
method is fast or slow, which setting to deploy at which load, and acceptance in detail.
It reads the analysis tables param_sweep, speedup_decomposition, best_setting,
position_acceptance and accepted_histogram (and method_families) as :mod:`report.data`
loads them, draws its charts with the report's theme and one colour per method
(:mod:`report.charts`), and returns raw LaTeX built from escaped values for
``latex/speculation.tex.j2``; :mod:`report.speculation.section` is what the report's
figures and context call (figures are saved through the function they pass in, so this
package never imports :mod:`report.figures`).
"""
