"""The report: stored results turned into what a reader compares.

Owns: building the Report (MLPerf scores as published, the best per benchmark and GPU type,
time-to-train, step-time stats, throughput, scaling, speedups, the GPU type of each result
(gpus), cost at list price (cost), the nearest published result (vs_published), attempt history,
spot preemptions and cost saved) and rendering it as JSON, Markdown, the terminal summary
(terminal: a view of typed rows and its plain-text layout), HTML with PNG plots, or the
interactive site (site: pages from templates/report/, plotly specs from figures, the history's
types from history, each benchmark page's forecast curves from forecast.curve); long names cut for
columns and axes (labels). Returns data; the CLI prints.
May import: the base, hardware.catalog, forecast/, goodput/, results/ and store/.
Exposes: build.build_report, terminal.summary_view/render_text, cost.parse_price, render, plots,
site.write_site, history.History.
"""
