"""The report: stored results turned into what a reader compares.

Owns: building the Report (MLPerf scores as published, the best per benchmark and GPU type,
time-to-train, step-time stats, throughput, scaling, speedups, the GPU type of each result
(gpus), cost at list price (cost), the published neighbour, attempt history,
spot preemptions and cost saved, the fabric section (fabric/lines judges the stored runs; its
charts fabric_figures and its site page fabric_site are drawn here)) and rendering it as JSON, Markdown, the terminal summary
(terminal: a view of typed rows and its plain-text layout), or the
interactive site (site: pages from templates/report/, plotly specs from figures, the history's
types from history, each benchmark page's forecast curves from forecast.curve); long names cut for
columns and axes (labels). Every figure is computed by results.definitions (docs/figures.md),
goodput's by goodput/ (its page goodput_charts draws them); this folder only groups results and
formats. Returns data; the CLI prints.
May import: the base, explain/ (the step model beside the measured step), hardware.catalog, fabric/,
forecast/, goodput/, results/ and store/.
Exposes: build.build_report, terminal.summary_view/render_text, cost.parse_price, render,
site.write_site, history.History.
"""
