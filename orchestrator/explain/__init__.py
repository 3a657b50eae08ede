"""Explain: where each second of a training step goes, predicted from first principles and set
against what a run measured.

Owns: the step-time model (`model`: compute, tensor/context/expert-parallel communication, the
pipeline bubble and its point-to-point traffic, data-parallel gradient and parameter collectives,
the optimizer and the rest, each costed on the links its group spans through the rank-order map),
its few fitted parameters and the data they come from (`fit`), the published step times it is
fitted and checked on (`published`: recipes/published/step_times.csv), the leave-one-out and
forward checks (`validate`), and the account a reader sees: a run's or a published system's
breakdown beside its measured step and the gap (`account`). Pure: returns data and raises
ConfigError; the CLI prints.
May import: the base, hardware/, recipes/ and results/.
Exposes: model.predict/StepConfig/Breakdown, fit.fitted_params, published.scales,
validate.leave_one_out/forward, account.explain_scale/explain_config.
"""
