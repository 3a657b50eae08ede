"""The report: stored results turned into what a reader compares.

Owns: building the Report (scores, time-to-train, step-time stats, throughput, scaling,
speedups, cost, attempt history, spot preemptions and cost saved) and rendering it as JSON,
Markdown, rich tables, HTML with PNG plots, or the interactive site (site: pages from
templates/report/, plotly specs from figures, the history's types from history). Returns data;
the CLI prints.
May import: the base, hardware.catalog, results/ and store/.
Exposes: build.build_report, render, plots, site.write_site, history.History.
"""
