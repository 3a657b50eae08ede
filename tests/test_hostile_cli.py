"""Hostile input to the CLI (issue 22): each case is refused with exactly one stderr line, no
traceback, the documented exit code (errors.EXIT_CODES), and nothing written outside
AZBENCH_HOME. The table runs in-process (tests/cli_helpers.azbench_in_process) to stay fast;
what only a real process shows (a closed stdout) runs as a subprocess. Then property tests
(hypothesis) over spec loading and `-p` parsing, and the failure paths (full disk, Ctrl-C,
events after facts) at unit level."""

from __future__ import annotations

import errno
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orchestrator.errors import EXIT_CODES, EXIT_INTERRUPTED, ConfigError, StoreError
from tests.cli_helpers import azbench_in_process

BOMB = "a0: &a0 [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]\n" for i in range(1, 10))
CLUSTER = "name: hostile\nnodes: 1\n"
AZURE = "name: hostile\nnodes: 1\nprovider: azure\nsku: h100\nregion: eastus\nazure:\n"
RUN = "recipe: smoke\n"

# file name -> content (str, or bytes); "fifo" is made with mkfifo
INPUTS: dict[str, str | bytes] = {
    "bomb.yaml": "name: hostile\nnodes: 1\ntags: {}\n" + BOMB.replace("a0:", "x0:", 0),
    "bomb_run.yaml": RUN + BOMB,
    "bomb_pipe.yaml": "name: p\n" + BOMB,
    "recursive.yaml": "name: hostile\nnodes: 1\nx: &a [*a]\n",
    "deep.yaml": "name: hostile\nnodes: " + "[" * 500 + "]" * 500 + "\n",
    "deep_block.yaml": "".join(" " * (2 * i) + f"k{i}:\n" for i in range(200)) + " " * 400 + "v: 1\n",
    "wide.yaml": "name: hostile\nnodes: 1\ntags: [" + ", ".join(["1"] * 30_000) + "]\n",
    "dup.yaml": "name: hostile\nnodes: 1\nname: other\n",
    "dup_nested.yaml": AZURE + "  expires_hours: 6\n  expires_hours: 7\n",
    "dup_run.yaml": RUN + "repeats: 1\nrepeats: 2\n",
    "dup_pipe.yaml": "name: p\nname: q\nmatrix: [{recipe: smoke}]\n",
    "big.yaml": "name: hostile\nnodes: 1\n# " + "x" * (1 << 20) + "\n",
    "notutf8.yaml": b"name: hostile\nnodes: 1\ntags: {a: \xff\xfe}\n",
    "bigint.yaml": "name: hostile\nnodes: " + "9" * 5000 + "\n",
    "list.yaml": "- name\n- nodes\n",
    "scalar.yaml": "just a string\n",
    "malformed.yaml": "name: hostile\nnodes: [1\n",
    "tabs.yaml": "name: hostile\n\tnodes: 1\n",
    "two_docs.yaml": "name: a\nnodes: 1\n---\nname: b\nnodes: 1\n",
    "unknown_key.yaml": CLUSTER + "colour: red\n",
    "complex_key.yaml": CLUSTER + "? [a, b]\n: 1\n",
    "expires_inf.yaml": AZURE + "  expires_hours: .inf\n",
    "expires_big.yaml": AZURE + "  expires_hours: 1e300\n",
    "expires_nan.yaml": AZURE + "  expires_hours: .nan\n",
    "expires_small.yaml": AZURE + "  expires_hours: 0.01\n",
    "expires_week.yaml": AZURE + "  expires_hours: 169\n",
    "spot_inf.yaml": AZURE + "  priority: spot\n  spot_restore_timeout: .inf\n",
    "spot_huge.yaml": AZURE + "  priority: spot\n  spot_restore_timeout: 99999999999999999999d\n",
    "spot_nan.yaml": AZURE + "  priority: spot\n  spot_restore_timeout: .nan\n",
    "max_price_nan.yaml": AZURE + "  max_price: .nan\n",
    "max_price_inf.yaml": AZURE + "  max_price: .inf\n",
    "cost_inf.yaml": AZURE + "  max_cost_per_hour: .inf\n",
    "poll_inf.yaml": AZURE + "  polling_interval: .inf\n",
    "boot_neg.yaml": AZURE + "  boot_timeout_s: -.inf\n",
    "arm_garbage.yaml": AZURE + "  arm_endpoint: 'not a url'\n",
    "arm_http.yaml": AZURE + "  arm_endpoint: http://management.azure.com\n",
    "arm_ipv6.yaml": AZURE + "  arm_endpoint: 'https://[::1'\n",
    "nodes_float.yaml": "name: hostile\nnodes: 1.5\n",
    "nodes_huge.yaml": "name: hostile\nnodes: 100001\n",
    "nodes_inf.yaml": "name: hostile\nnodes: .inf\n",
    "name_bad.yaml": "name: ../../etc\nnodes: 1\n",
    "hang_inf.yaml": RUN + "retry:\n  hang_timeout: .inf\n",
    "hang_nan.yaml": RUN + "retry:\n  hang_timeout: .nan\n",
    "hang_zero.yaml": RUN + "retry:\n  hang_timeout: 0\n",
    "duration_big.yaml": RUN + "retry:\n  max_duration: 1.0e+308\n",
    "backoff_inf.yaml": RUN + "retry:\n  backoff_s: .inf\n",
    "health_inf.yaml": RUN + "health:\n  timeout: .inf\n",
    "busbw_nan.yaml": RUN + "health:\n  busbw_warn_fraction: .nan\n",
    "time_limit.yaml": RUN + "time_limit_min: 99999999\n",
    "run_nodes0.yaml": RUN + "nodes: [0]\n",
    "run_nodes_str.yaml": RUN + "nodes: ['²']\n",
    "param_inf.yaml": RUN + "params: {target: .inf}\n",
    "param_unknown.yaml": RUN + "params: {nosuch: 1}\n",
    "param_type.yaml": RUN + "params: {threads: many}\n",
    "param_empty_name.yaml": RUN + "params: {'': 1}\n",
    "repeats0.yaml": RUN + "repeats: 0\n",
    "pipe_unknown_param.yaml": "name: p\nmatrix: [{recipe: smoke, params: {nosuch: 1}}]\n",
    "pipe_timeout_inf.yaml": "name: p\nmatrix: [{recipe: smoke}]\ntimeout: .inf\n",
    "pipe_empty_matrix.yaml": "name: p\nmatrix: []\n",
    "pipe_unknown_recipe.yaml": "name: p\nmatrix: [{recipe: nosuch}]\n",
    "pipe_nodes_huge.yaml": "name: p\nmatrix: [{recipe: smoke, nodes: [1000000]}]\n",
    "file.txt": "a plain file\n",
    # tag names as Azure documents them (issue 32, point 12)
    "tag_empty.yaml": CLUSTER + "tags: {'': x}\n",
    "tag_slash.yaml": CLUSTER + "tags: {a/b: x}\n",
    "tag_value.yaml": CLUSTER + "tags: {team: " + "v" * 257 + "}\n",
    "tag_case.yaml": CLUSTER + "tags: {Env: a, env: b}\n",
    "tag_ours.yaml": CLUSTER + "tags: {azbench-owner: me}\n",
}

C, NF, U = 2, 2, 2  # config error, not found, usage error: all exit 2 (errors.EXIT_CODES)

# (args with {D} = the inputs folder, expected exit code, regex the one stderr line matches)
CASES: list[tuple[str, int, str]] = [
    # -- spec files: the loader's bounds (up --dry-run -f)
    ("up --dry-run -f {D}/bomb.yaml", C, r"bomb.yaml:\d+: expands to more than 20,000 values"),
    ("up --dry-run -f {D}/recursive.yaml", C, r"recursive.yaml:3: alias \*a refers to a value that contains it"),
    ("up --dry-run -f {D}/deep.yaml", C, r"deep.yaml:2: nested deeper than 64 levels"),
    ("up --dry-run -f {D}/deep_block.yaml", C, r"deep_block.yaml:\d+: nested deeper than 64 levels"),
    ("up --dry-run -f {D}/wide.yaml", C, r"wide.yaml:3: has more than 20,000 values"),
    ("up --dry-run -f {D}/dup.yaml", C, r"dup.yaml:3: duplicate key 'name' \(first given on line 1\)"),
    ("up --dry-run -f {D}/dup_nested.yaml", C, r"dup_nested.yaml:8: duplicate key 'expires_hours'"),
    ("up --dry-run -f {D}/big.yaml", C, r"big.yaml: [\d,]+ bytes is over the 1 MiB limit"),
    ("up --dry-run -f {D}/fifo", C, r"fifo: is not a regular file"),
    ("up --dry-run -f /dev/zero", C, r"/dev/zero: is not a regular file"),
    ("up --dry-run -f {D}", C, r": is a directory: a spec must be a regular file"),
    ("up --dry-run -f {D}/missing.yaml", C, r"missing.yaml: file not found"),
    ("up --dry-run -f {D}/file.txt/x.yaml", C, r"x.yaml: cannot read: Not a directory"),
    ("up --dry-run -f {D}/notutf8.yaml", C, r"notutf8.yaml:3: not UTF-8 text"),
    ("up --dry-run -f {D}/bigint.yaml", C, r"bigint.yaml: unusable value: Exceeds the limit"),
    ("up --dry-run -f {D}/list.yaml", C, r"list.yaml:1: expected a mapping"),
    ("up --dry-run -f {D}/scalar.yaml", C, r"scalar.yaml:1: expected a mapping"),
    ("up --dry-run -f {D}/malformed.yaml", C, r"malformed.yaml:\d+: malformed YAML"),
    ("up --dry-run -f {D}/tabs.yaml", C, r"tabs.yaml:2: malformed YAML"),
    ("up --dry-run -f {D}/two_docs.yaml", C, r"two_docs.yaml:\d+: malformed YAML: .*single document"),
    ("up --dry-run -f {D}/unknown_key.yaml", C, r"unknown_key.yaml:3: unknown key 'colour'"),
    ("up --dry-run -f {D}/complex_key.yaml", C, r"complex_key.yaml:\d+: malformed YAML: found unhashable key"),
    # -- spec files: numbers finite and bounded
    ("up --dry-run -f {D}/expires_inf.yaml", C, r"azure.expires_hours: must be between 0.25 and 168, got inf"),
    ("up --dry-run -f {D}/expires_big.yaml", C, r"azure.expires_hours: must be between 0.25 and 168, got 1e\+300"),
    ("up --dry-run -f {D}/expires_nan.yaml", C, r"azure.expires_hours: must be between 0.25 and 168, got nan"),
    ("up --dry-run -f {D}/expires_small.yaml", C, r"expires_small.yaml:7: azure.expires_hours: must be between 0.25"),
    ("up --dry-run -f {D}/expires_week.yaml", C, r"azure.expires_hours: must be between 0.25 and 168, got 169"),
    ("up --dry-run -f {D}/spot_inf.yaml", C, r"spot_restore_timeout: 'inf' is not a finite duration"),
    ("up --dry-run -f {D}/spot_nan.yaml", C, r"spot_restore_timeout: 'nan' is not a finite duration"),
    ("up --dry-run -f {D}/spot_huge.yaml", C, r"spot_restore_timeout: must be between 0 and 604800 seconds"),
    ("up --dry-run -f {D}/max_price_nan.yaml", C, r"max_price must be -1 .* got nan"),
    ("up --dry-run -f {D}/max_price_inf.yaml", C, r"max_price must be -1 .* got inf"),
    ("up --dry-run -f {D}/cost_inf.yaml", C, r"max_cost_per_hour: must be between 0.01 and 1000000, got inf"),
    ("up --dry-run -f {D}/poll_inf.yaml", C, r"polling_interval: must be between 0.01 and 600 seconds, got inf"),
    ("up --dry-run -f {D}/boot_neg.yaml", C, r"boot_timeout_s: must be between 0 and 86400 seconds, got -inf"),
    ("up --dry-run -f {D}/arm_garbage.yaml", C, r"arm endpoint 'not a url' is not an https URL"),
    ("up --dry-run -f {D}/arm_http.yaml", C, r"arm endpoint 'http://management.azure.com' is not an https URL"),
    ("up --dry-run -f {D}/arm_ipv6.yaml", C, r"arm endpoint 'https://\[::1' is not a URL"),
    ("up --dry-run -f {D}/nodes_float.yaml", C, r"nodes_float.yaml:2: nodes: Input should be a valid integer"),
    ("up --dry-run -f {D}/nodes_huge.yaml", C, r"nodes: must be between 1 and 100000, got 100001"),
    ("up --dry-run -f {D}/nodes_inf.yaml", C, r"nodes: Input should be a valid integer"),
    ("up --dry-run -f {D}/name_bad.yaml", C, r"name_bad.yaml:1: name: String should match pattern"),
    # -- run spec files
    ("run -f {D}/bomb_run.yaml --dry-run --sku local", C, r"bomb_run.yaml:\d+: expands to more than"),
    ("run -f {D}/dup_run.yaml --dry-run --sku local", C, r"dup_run.yaml:3: duplicate key 'repeats'"),
    ("run -f {D}/hang_inf.yaml --dry-run --sku local", C, r"retry.hang_timeout: 'inf' is not a finite duration"),
    ("run -f {D}/hang_nan.yaml --dry-run --sku local", C, r"retry.hang_timeout: 'nan' is not a finite duration"),
    ("run -f {D}/hang_zero.yaml --dry-run --sku local", C, r"retry.hang_timeout: must be between 1 and 604800 seconds, got 0"),
    ("run -f {D}/duration_big.yaml --dry-run --sku local", C, r"retry.max_duration: must be between 1 and 2592000 seconds"),
    ("run -f {D}/backoff_inf.yaml --dry-run --sku local", C, r"retry.backoff_s: must be between 0 and 3600 seconds, got inf"),
    ("run -f {D}/health_inf.yaml --dry-run --sku local", C, r"health.timeout: 'inf' is not a finite duration"),
    ("run -f {D}/busbw_nan.yaml --dry-run --sku local", C, r"health.busbw_warn_fraction: must be between 0.01 and 1, got nan"),
    ("run -f {D}/time_limit.yaml --dry-run --sku local", C, r"time_limit_min: must be between 1 and 10080 minutes"),
    ("run -f {D}/run_nodes0.yaml --dry-run --sku local", C, r"nodes.0: must be between 1 and 100000, got 0"),
    ("run -f {D}/run_nodes_str.yaml --dry-run --sku local", C, r"nodes.0: Input should be a valid integer"),
    ("run -f {D}/param_inf.yaml --dry-run --sku local", C, r"params: Value error, target must be a finite number|target must be a finite number"),
    ("run -f {D}/param_unknown.yaml --dry-run --sku local", C, r"recipe 'smoke' has no parameter 'nosuch' \(parameters: checkpoint_every"),
    ("run -f {D}/param_type.yaml --dry-run --sku local", C, r"parameter 'threads': 'many' is not a whole number"),
    ("run -f {D}/param_empty_name.yaml --dry-run --sku local", C, r"a parameter needs a name"),
    ("run -f {D}/repeats0.yaml --dry-run --sku local", C, r"repeats: Input should be greater than or equal to 1"),
    ("run -f {D}/fifo --dry-run --sku local", C, r"fifo: is not a regular file"),
    ("run -f {D}/big.yaml --dry-run --sku local", C, r"over the 1 MiB limit"),
    # -- pipeline files
    ("pipeline run {D}/bomb_pipe.yaml --yes", C, r"bomb_pipe.yaml:\d+: expands to more than"),
    ("pipeline run {D}/dup_pipe.yaml --yes", C, r"dup_pipe.yaml:2: duplicate key 'name'"),
    ("pipeline run {D}/deep.yaml --yes", C, r"deep.yaml:2: nested deeper than 64 levels"),
    ("pipeline run {D}/fifo --yes", C, r"fifo: is not a regular file"),
    ("pipeline run /dev/zero --yes", C, r"/dev/zero: is not a regular file"),
    ("pipeline run {D}/big.yaml --yes", C, r"over the 1 MiB limit"),
    ("pipeline run {D}/pipe_unknown_param.yaml --yes", C, r"recipe 'smoke' has no parameter 'nosuch'"),
    ("pipeline run {D}/pipe_timeout_inf.yaml --yes", C, r"timeout: 'inf' is not a finite duration"),
    ("pipeline run {D}/pipe_empty_matrix.yaml --yes", C, r"matrix: List should have at least 1 item"),
    ("pipeline run {D}/pipe_unknown_recipe.yaml --yes", NF, r"unknown recipe 'nosuch'"),
    ("pipeline run {D}/pipe_nodes_huge.yaml --yes", C, r"nodes: must be between 1 and 100000, got 1000000"),
    ("pipeline run {D}/missing.yaml --yes", C, r"missing.yaml: file not found"),
    ("pipeline run {D}/bomb_pipe.yaml --yes --poll inf", C, r"--poll: must be between 0.05 and 3600, got inf"),
    # -- run flags: -p, --nodes, --repeats, --poll
    ("run smoke --dry-run --sku local -p nosuch=1", C, r"recipe 'smoke' has no parameter 'nosuch' \(parameters: .*threads\)"),
    ("run smoke --dry-run --sku local -p target=--5", C, r"parameter 'target': '--5' is not a finite number"),
    ("run smoke --dry-run --sku local -p threads=²", C, r"parameter 'threads': '²' is not a whole number"),
    ("run smoke --dry-run --sku local -p threads=1.5", C, r"parameter 'threads': '1.5' is not a whole number"),
    ("run smoke --dry-run --sku local -p target=nan", C, r"parameter 'target': 'nan' is not a finite number"),
    ("run smoke --dry-run --sku local -p target=inf", C, r"parameter 'target': 'inf' is not a finite number"),
    ("run smoke --dry-run --sku local -p target=1e999", C, r"parameter 'target': '1e999' is not a finite number"),
    ("run smoke --dry-run --sku local -p target=٣", C, r"parameter 'target': '٣' is not a finite number"),
    ("run smoke --dry-run --sku local -p max_steps=99999999999999999999999", C, r"'max_steps': .* is not a whole number"),
    ("run smoke --dry-run --sku local -p =1", C, r"--param: '=1' is not KEY=VALUE"),
    ("run smoke --dry-run --sku local -p novalue", C, r"--param: 'novalue' is not KEY=VALUE"),
    ("run gpt3 --dry-run --sku h100 -p x=1", C,
     r"recipe 'gpt3' takes environment variables of its implementation as parameters .*'x' is not one"),
    ("run gpt3 --dry-run --sku h100 --nodes 8 -p NOT_READ_ANYWHERE=1", C, r"-p NOT_READ_ANYWHERE: .* does not read it"),
    ("run smoke --dry-run --sku local --nodes ²", C, r"--nodes: '²' is not a whole number"),
    ("run smoke --dry-run --sku local --nodes 0", C, r"--nodes: node counts must be between 1 and 100000, got 0"),
    ("run smoke --dry-run --sku local --nodes -1", C, r"--nodes: node counts must be between 1 and 100000, got -1"),
    ("run smoke --dry-run --sku local --nodes 1,,2", C, r"--nodes: '' is not a whole number"),
    ("run smoke --dry-run --sku local --nodes 1e3", C, r"--nodes: '1e3' is not a whole number"),
    ("run smoke --dry-run --sku local --nodes 99999999999999999999999", C, r"--nodes: '9+' is not a whole number"),
    ("run smoke --dry-run --sku local --nodes 100001", C, r"--nodes: node counts must be between 1 and 100000"),
    ("run smoke --dry-run --sku local --repeats 0", C, r"--repeats: Input should be greater than or equal to 1"),
    ("run smoke --dry-run --sku local --repeats 100000", C, r"--repeats: Input should be less than or equal to 1000"),
    ("run smoke --dry-run --sku local --repeats x", U, r"usage error: Invalid value for '--repeats'.*\(see 'azbench run --help'\)"),
    ("run smoke --dry-run --sku local --poll inf", C, r"--poll: must be between 0.05 and 3600, got inf"),
    ("run smoke --dry-run --sku local --poll nan", U, r"usage error: Invalid value for '--poll'"),
    ("run smoke --dry-run --sku local --poll 0", U, r"usage error: Invalid value for '--poll'"),
    ("run nosuch --dry-run --sku local", NF, r"unknown recipe 'nosuch'"),
    ("run ../../etc/passwd --dry-run --sku local", NF, r"unknown recipe '../../etc/passwd'"),
    ("run --dry-run --sku local", C, r"give a recipe name \(or a run spec with -f\), or --attach RUN"),
    ("run --attach r1 --dry-run", C, r"--dry-run needs a recipe, not --attach"),
    ("run smoke --dry-run --sku nosuch", NF, r"unknown SKU 'nosuch'"),
    ("run smoke --dry-run", NF, r"no cluster"),
    # -- extend --hours
    ("extend c --hours nan", C, r"--hours: must be between 0.25 and 168, got nan"),
    ("extend c --hours inf", C, r"--hours: must be between 0.25 and 168, got inf"),
    ("extend c --hours -inf", C, r"--hours: must be between 0.25 and 168, got -inf"),
    ("extend c --hours 1e308", C, r"--hours: must be between 0.25 and 168, got 1e\+308"),
    ("extend c --hours 0", C, r"--hours: must be between 0.25 and 168, got 0"),
    ("extend c --hours -1", C, r"--hours: must be between 0.25 and 168, got -1"),
    ("extend c --hours 0.1", C, r"--hours: must be between 0.25 and 168, got 0.1"),
    ("extend c --hours 169", C, r"--hours: must be between 0.25 and 168, got 169"),
    ("extend c --hours x", U, r"usage error: Invalid value for '--hours'"),
    ("extend c", U, r"usage error: Missing option '--hours'"),
    ("extend nosuch --hours 2", NF, r"no cluster named 'nosuch'"),
    # -- up flags
    ("up --dry-run --nodes ²", U, r"usage error: Invalid value for '--nodes'"),
    ("up --dry-run --nodes 0", C, r"--nodes: must be between 1 and 100000, got 0"),
    ("up --dry-run --nodes 100001", C, r"--nodes: must be between 1 and 100000, got 100001"),
    ("up --dry-run --nodes 1 --max-cost-per-hour inf", C, r"--max-cost-per-hour: must be between 0.01 and 1e\+06, got inf"),
    ("up --dry-run --nodes 1 --max-cost-per-hour nan", U, r"usage error: Invalid value for '--max-cost-per-hour'"),
    ("up --dry-run --nodes 1 --sku bogus", NF, r"unknown SKU 'bogus'"),
    ("up --dry-run --nodes 1 --provider bogus", C, r"unknown provider 'bogus'"),
    ("up --dry-run --nodes 1 --name BAD_NAME", C, r"--name: String should match pattern"),
    ("up --dry-run --nodes", U, r"usage error: Option '--nodes' requires an argument"),
    ("up --yes --provider azure --sku h100 --nodes 1 --region nowhere", C, r"unknown region 'nowhere'"),
    ("up --dry-run -f {D}/tag_empty.yaml", C, r"tag_empty.yaml:3: tags: a tag name must not be empty"),
    ("up --dry-run -f {D}/tag_slash.yaml", C, r"tag_slash.yaml:3: tags: tag name 'a/b' contains / \(Azure refuses"),
    ("up --dry-run -f {D}/tag_value.yaml", C, r"the value of tag 'team' is 257 characters long \(Azure allows 256\)"),
    ("up --dry-run -f {D}/tag_case.yaml", C, r"tag names 'Env' and 'env' are the same to Azure"),
    ("up --dry-run -f {D}/tag_ours.yaml", C, r"tag name 'azbench-owner': the azbench- prefix is azbench's own"),
    ("up --check --nodes 1", C, r"--check goes with --dry-run"),
    ("up --dry-run --check --nodes 1", 7, r"cluster 'local' \(local\) cannot check a plan against its cloud"),
    ("adopt nosuch --provider local", 7, r"cluster 'nosuch' \(local\) cannot be adopted from its cloud's tags"),
    ("adopt nosuch --arm-endpoint http://management.azure.com", C, r"--arm-endpoint: .* is not an https URL"),
    ("resize nosuch --nodes 2 --yes", NF, r"no cluster named 'nosuch'"),
    ("down nosuch --yes", NF, r"no cluster named 'nosuch'"),
    # -- init, report, sweep: paths and URLs
    ("init {D}/missing/dir/cluster.yaml", C, r"cannot write .*cluster.yaml: directory .*dir does not exist"),
    ("init {D}/file.txt", C, r"file.txt exists: pass --force to overwrite it"),
    ("init {D}", C, r"is a directory: give a file name"),
    ("init {D}/file.txt/cluster.yaml", C, r"directory .*file.txt does not exist"),
    ("report --html {D}/file.txt", C, r"--html: .*file.txt is a file: give a directory for the site"),
    ("report --html {D}/file.txt/sub", C, r"--html: cannot write .*: Not a directory"),
    ("report --since garbage", C, r"since|date"),
    ("sweep --dry-run --arm-endpoint garbage", C, r"--arm-endpoint: arm endpoint 'garbage' is not an https URL"),
    ("sweep --dry-run --arm-endpoint http://management.azure.com", C, r"is not an https URL"),
    ("sweep --dry-run --arm-endpoint https://[::1", C, r"is not a URL"),
    ("sweep --dry-run --arm-endpoint https://host:99999", C, r"is not a URL: Port out of range"),
    ("sweep --dry-run --arm-endpoint ftp://host", C, r"is not an https URL"),
    ("sweep --dry-run --arm-endpoint https://user@host", C, r"is not an https URL"),
    # -- names that do not exist, commands and flags that do not exist
    ("recipes show nosuch", NF, r"unknown recipe 'nosuch'"),
    ("recipes show smoke --nodes 0", C, r"node|nodes"),
    ("recipes show smoke --sku bogus", NF, r"unknown SKU 'bogus'"),
    ("recipes show ../smoke", NF, r"unknown recipe '../smoke'"),
    ("results show x", U, r"usage error: Invalid value for '\{?result_id\}?'|usage error: Invalid value"),
    ("results show 999", NF, r"999"),
    ("logs nosuch", NF, r"nosuch"),
    ("logs r1 --attempt x", U, r"usage error: Invalid value for '--attempt'"),
    ("down nosuch", NF, r"no cluster named 'nosuch'"),
    ("status nosuch", NF, r"no cluster named 'nosuch'"),
    ("ssh nosuch", NF, r"no cluster named 'nosuch'"),
    ("health nosuch", NF, r"no cluster named 'nosuch'"),
    ("compare x --min-confidence nan", C, r"--min-confidence: Input should be less than 1"),
    ("compare x --min-confidence inf", C, r"--min-confidence: Input should be less than 1"),
    ("compare x -t step_time=nan%", C, r"--tolerance.*less than or equal to 100"),
    ("compare x -t step_time=inf", C, r"--tolerance.*less than or equal to 100"),
    ("compare x -t bogus", C, r"--tolerance: 'bogus' is not METRIC=CHANGE"),
    ("health x --tolerance nan", U, r"usage error: Invalid value for '--tolerance'"),
    ("report --since 2026-13-45", C, r"--since: '2026-13-45' is not a date"),
    ("results show -1", U, r"usage error: No such option: -1"),
    ("baseline show nosuch", NF, r"no baseline named 'nosuch'"),
    ("bogus", U, r"usage error: No such command 'bogus'"),
    ("catalog --bogus", U, r"usage error: No such option: --bogus \(see 'azbench catalog --help'\)"),
    ("results bogus", U, r"usage error: No such command 'bogus'"),
    # -- output options (issue 31): -o, --query, --json against -o
    ("catalog -o xml", U, r"usage error: Invalid value for '--output' / '-o': .*'xml' is not one of 'table', 'json', 'jsonc', 'yaml', 'yamlc', 'tsv'"),
    ("status -o", U, r"usage error: Option '-o' requires an argument"),
    ("recipes list --output=xml", U, r"usage error: Invalid value for '--output' / '-o'"),
    ("results list -o tsv,json", U, r"usage error: Invalid value for '--output' / '-o'"),
    ("report -o html", U, r"usage error: Invalid value for '--output' / '-o'"),
    ("catalog --query", U, r"usage error: Option '--query' requires an argument"),
    ("catalog --query=", C, r"--query: invalid JMESPath expression '': cannot be empty"),
    ("catalog --query [?", C, r"--query: invalid JMESPath expression '\[\?': incomplete expression \(at column 2\)"),
    ("status --query foo[", C, r"--query: invalid JMESPath expression 'foo\[': incomplete expression"),
    ("recipes list --query \"x", C, r"--query: invalid JMESPath expression '\"x': unclosed \" delimiter"),
    ("results list --query a.b.", C, r"--query: invalid JMESPath expression 'a.b.': expecting: .* \(at column 4\)"),
    ("report --query ]]]", C, r"--query: invalid JMESPath expression"),
    ("catalog --query nosuch(@)", C, r"--query 'nosuch\(@\)': unknown function: nosuch\(\)"),
    ("report --query sum(@)", C, r"--query 'sum\(@\)': in function sum\(\), invalid type"),
    ("recipes list --query length(@,@)", C, r"--query 'length\(@,@\)': expected 1 argument for function length\(\), received 2"),
    ("catalog --json -o tsv", C, r"--json is -o json: it cannot be combined with -o tsv"),
    ("status --json -o table", C, r"--json is -o json: it cannot be combined with -o table"),
]


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("inputs")
    for name, content in INPUTS.items():
        path = root / name
        path.write_bytes(content) if isinstance(content, bytes) else path.write_text(content)
    os.mkfifo(root / "fifo")
    return root


def _tree(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in root.rglob("*") if not p.is_fifo()}


def test_the_table_is_big_and_every_code_is_documented():
    assert len(CASES) >= 100
    assert {code for _, code, _ in CASES} <= set(EXIT_CODES)


@pytest.mark.parametrize("args, code, pattern", CASES, ids=[c[0][:60] for c in CASES])
def test_hostile_case_is_one_line_with_its_code_and_writes_nothing_outside_home(
        args, code, pattern, inputs, tmp_path):
    home, cwd, tmp = tmp_path / "home", tmp_path / "cwd", tmp_path / "tmp"
    cwd.mkdir()
    tmp.mkdir()
    before = _tree(inputs)
    argv = [a.replace("{D}", str(inputs)) for a in args.split(" ")]
    result = azbench_in_process(*argv, home=home, cwd=cwd, env={"TMPDIR": str(tmp)})
    lines = [line for line in result.err.splitlines() if line.strip()]
    assert "Traceback" not in result.err, result.err
    assert len(lines) == 1, result.err
    assert result.code == code, result.err
    assert lines[0].startswith("azbench: ") and "internal error" not in lines[0], lines[0]
    assert re.search(pattern, lines[0]), lines[0]
    assert _tree(inputs) == before  # nothing written beside the inputs
    assert not any(cwd.iterdir()) and not any(tmp.iterdir())  # nor in the working dir or TMPDIR


def test_a_closed_stdout_is_one_line_and_exit_2(tmp_path):
    """`azbench catalog --json >&-`: Python starts with no sys.stdout at all."""
    env = {**os.environ, "AZBENCH_HOME": str(tmp_path / "home")}
    env.pop("AZBENCH_DEBUG", None)
    proc = subprocess.run(["sh", "-c", f'exec "{sys.executable}" -m orchestrator catalog --json >&-'],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines() == [
        "azbench: usage error: standard output is closed: nothing could be printed "
        "(redirect it to a file or /dev/null instead)"]


# -- Ctrl-C, disk full, read-only paths: the failure paths at unit level -----------------------

def test_ctrl_c_says_interrupted_and_exits_130_even_where_typer_catches_it(tmp_path, monkeypatch):
    import orchestrator.hardware.catalog as catalog

    class Boom:
        def __iter__(self):
            raise KeyboardInterrupt
    monkeypatch.setattr(catalog, "CATALOG", Boom())
    result = azbench_in_process("catalog", "--json", home=tmp_path / "home")
    assert result.code == EXIT_INTERRUPTED == 130
    assert result.err.strip().splitlines() == ["azbench: interrupted"]


def test_ctrl_c_inside_a_store_write_leaves_nothing_half_written(azbench_home):
    from orchestrator.store.database import Store
    from orchestrator.store.schema import EventRow
    with Store.open() as store:
        store.add_event(EventRow(kind="up", cluster="c", message="kept"))
        with pytest.raises(KeyboardInterrupt), store.transaction():
            store.add_event(EventRow(kind="extend", cluster="c", message="lost"))
            raise KeyboardInterrupt
        assert [e.message for e in store.list_events(cluster="c")] == ["kept"]


def _full_disk(real):
    """A write that gets half way and then meets ENOSPC, as a full disk does."""
    def write(self, data, *args, **kwargs):
        real(self, data[: len(data) // 2], *args, **kwargs)
        raise OSError(errno.ENOSPC, "No space left on device", str(self))
    return write


def test_a_full_disk_is_exit_6_in_one_line_and_leaves_no_temp_file(tmp_path, monkeypatch):
    from orchestrator.paths import write_atomic
    monkeypatch.setattr(Path, "write_text", _full_disk(Path.write_text))
    with pytest.raises(StoreError, match=r"^no space left on device writing .*out.txt$"):
        write_atomic(tmp_path / "out.txt", "x" * 1000)
    assert list(tmp_path.iterdir()) == []
    result = azbench_in_process("init", str(tmp_path / "cluster.yaml"), home=tmp_path / "home")
    assert result.code == 6 == StoreError.exit_code
    assert result.err.strip().splitlines() == [
        f"azbench: store error: no space left on device writing {tmp_path / 'cluster.yaml'}"]
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # home is made lazily: nothing at all


def test_enospc_anywhere_is_exit_6_not_an_internal_error(tmp_path, monkeypatch):
    import orchestrator.hardware.catalog as catalog

    class Full:
        def __iter__(self):
            raise OSError(errno.ENOSPC, "No space left on device", "/var/x")
    monkeypatch.setattr(catalog, "CATALOG", Full())
    result = azbench_in_process("catalog", "--json", home=tmp_path / "home")
    assert result.code == 6
    assert result.err.strip().splitlines() == ["azbench: store error: no space left on device writing /var/x"]


def test_archive_on_a_full_disk_keeps_no_partial_copy(tmp_path, monkeypatch):
    import shutil

    from orchestrator.results.ingest import archive_log
    log = tmp_path / "result_0.txt"
    log.write_text(":::MLLOG {}\n" * 100)
    archive = tmp_path / "archive"

    def copy(src, dst, *length):  # archive_log streams from the opened regular file
        dst.write(b"partial")
        dst.flush()
        raise OSError(errno.ENOSPC, "No space left on device", dst.name)
    monkeypatch.setattr(shutil, "copyfileobj", copy)
    with pytest.raises(StoreError, match="no space left on device archiving"):
        archive_log(log, "abc", archive)
    assert list(archive.iterdir()) == []


def test_report_html_into_a_read_only_directory_is_one_line_exit_2(tmp_path, monkeypatch):
    import orchestrator.paths as paths

    def refuse(path, data):
        raise PermissionError(errno.EACCES, "Permission denied", str(path))
    monkeypatch.setattr(paths, "write_atomic", refuse)
    import orchestrator.report.site as site
    monkeypatch.setattr(site, "write_atomic", refuse)
    result = azbench_in_process("report", "--html", str(tmp_path / "out"), home=tmp_path / "home")
    assert result.code == 2
    [line] = result.err.strip().splitlines()
    assert re.fullmatch(rf"azbench: config error: --html: cannot write {re.escape(str(tmp_path / 'out'))}/"
                        r"\S+\.html: Permission denied", line), line


def _read_only(real, folder):
    """Writes under `folder` meet a read-only file system (EROFS: a read-only mount, where even
    root cannot write), as the OS raises it: no PermissionError subclass."""
    def write(self, *args, **kwargs):
        if str(self).startswith(str(folder)):
            raise OSError(errno.EROFS, "Read-only file system", str(self))
        return real(self, *args, **kwargs)
    return write


@pytest.mark.parametrize("args", [["init", "{D}/cluster.yaml"], ["report", "--html", "{D}/site"]])
def test_a_read_only_folder_is_one_line_naming_the_path_exit_2(args, tmp_path, monkeypatch):
    """Issue 32, point 12: `init` and `report --html` into a read-only folder were 'internal
    error' (exit 1). Now any OSError about a path the user named is one line with the path."""
    folder = tmp_path / "ro"
    folder.mkdir()
    monkeypatch.setattr(Path, "write_text", _read_only(Path.write_text, folder))
    monkeypatch.setattr(Path, "write_bytes", _read_only(Path.write_bytes, folder))
    result = azbench_in_process(*[a.replace("{D}", str(folder)) for a in args], home=tmp_path / "home")
    [line] = result.err.strip().splitlines()
    assert result.code == 2 and "internal error" not in line and "Traceback" not in result.err
    assert re.fullmatch(rf"azbench: config error: (cannot write )?{re.escape(str(folder))}/\S+: Read-only file system",
                        line), line
    assert [p for p in folder.rglob("*") if p.is_file()] == []  # nothing half-written


def test_an_arm_endpoint_in_the_environment_is_checked_as_an_https_url(tmp_path):
    for bad, why in (("http://[::1", "is not a URL: Invalid IPv6 URL"), ("http://arm.example", "is not an https URL")):
        result = azbench_in_process("sweep", "--dry-run", home=tmp_path / "home",
                                    env={"AZURE_RESOURCE_MANAGER_ENDPOINT": bad,
                                         "AZURE_SUBSCRIPTION_ID": "00000000-0000-0000-0000-0000000000aa"})
        [line] = result.err.strip().splitlines()
        assert result.code == 2, line
        assert line.startswith(f"azbench: config error: AZURE_RESOURCE_MANAGER_ENDPOINT: arm endpoint '{bad}' {why}")


def test_extend_that_azure_refuses_records_no_extend_event(tmp_path):
    """Issue 32, point 12: `extend` with an invalid subscription failed but recorded `extend`."""
    from datetime import datetime, timedelta, timezone

    from orchestrator.models import Cluster, ClusterState
    from orchestrator.providers.azure.props import AzureProps
    from orchestrator.store.database import Store
    home = tmp_path / "home"
    deadline = datetime.now(timezone.utc) + timedelta(hours=3)
    os.environ["AZBENCH_HOME"], saved = str(home), os.environ.get("AZBENCH_HOME")
    try:
        with Store.open() as store:
            store.save_cluster(Cluster(name="ext", provider="azure", sku="h100", nodes=1, state=ClusterState.READY,
                                       properties=AzureProps(subscription_id="not-a-guid",
                                                             resource_group="azbench-ext").with_deadline(deadline)))
        result = azbench_in_process("extend", "ext", "--hours", "2", home=home)
        assert result.code == 2 and "is not a subscription id" in result.err
        with Store.open() as store:
            assert [e.kind for e in store.list_events(cluster="ext")] == ["extend_failed"]
    finally:
        if saved is None:
            os.environ.pop("AZBENCH_HOME", None)
        else:
            os.environ["AZBENCH_HOME"] = saved


# -- events after facts --------------------------------------------------------------------------

def test_a_failed_extend_is_recorded_as_attempted_and_a_good_one_after_the_fact(azbench_home, monkeypatch):
    from datetime import datetime, timedelta, timezone

    from orchestrator.clusters import lifecycle
    from orchestrator.errors import ProvisionError
    from orchestrator.providers.fake.props import FakeProps
    from orchestrator.store.database import Store

    deadline = datetime(2030, 1, 1, tzinfo=timezone.utc)
    calls: list[datetime] = []

    from orchestrator.providers.base import ProviderParts

    class Provider:
        fail = True

        def parts(self) -> ProviderParts:
            return ProviderParts(expiry=self, ownership=self)  # type: ignore[arg-type]

        def extend(self, cluster, when):
            calls.append(when)
            if self.fail:
                raise ProvisionError("ARM said 403 AuthorizationFailed")

        def foreign_owner(self, cluster):
            return None  # the caller made it (extend asks first, as down and resize do)

    provider = Provider()
    up = azbench_in_process("up", "--provider", "fake", "--name", "ext", "--sku", "h100",
                            "--nodes", "1", home=azbench_home)
    assert up.code == 0, up.err
    monkeypatch.setattr(lifecycle, "get_provider", lambda name, **kw: provider)
    monkeypatch.setattr(lifecycle, "expires_at", lambda cluster: deadline)
    monkeypatch.setattr(FakeProps, "with_deadline", lambda self, when: self)  # no expiry of its own
    with Store.open() as store:
        assert [e.message for e in store.list_events(cluster="ext")] == ["up 1 x Standard_ND96isr_H100_v5"]
        monkeypatch.setattr(lifecycle, "require_cluster", lambda name, store, **kw: store.get_cluster(name).cluster)
        with pytest.raises(ProvisionError):
            lifecycle.extend("ext", 2, store, now=deadline - timedelta(hours=1))
        assert [e.kind for e in store.list_events(cluster="ext") if e.kind.startswith("extend")] == \
            ["extend_failed"]  # issue 32: an `extend` event means ARM accepted the new tag
        events = [e.message for e in store.list_events(cluster="ext") if e.kind == "extend_failed"]
        assert events == ["expiry 2030-01-01T00:00:00Z -> 2030-01-01T02:00:00Z attempted, "
                          "failed: ARM said 403 AuthorizationFailed"]
        provider.fail = False
        lifecycle.extend("ext", 2, store, now=deadline - timedelta(hours=1))
        events = [e.message for e in store.list_events(cluster="ext") if e.kind == "extend"]
        assert events[-1] == "expiry 2030-01-01T00:00:00Z -> 2030-01-01T02:00:00Z"
        assert len(calls) == 2


# -- properties ----------------------------------------------------------------------------------

_scalars = st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**6),
                     st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=20))
_docs = st.recursive(_scalars, lambda kids: st.lists(kids, max_size=4)
                     | st.dictionaries(st.text(max_size=8), kids, max_size=4), max_leaves=20)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=st.text(max_size=300))
def test_any_text_loads_or_is_one_config_error(text):
    from orchestrator.yamlio import parse_yaml
    try:
        parse_yaml(text, "p.yaml")
    except ConfigError as exc:
        assert "\n" not in str(exc) and str(exc).startswith("p.yaml")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(doc=st.dictionaries(st.sampled_from(["name", "nodes", "provider", "sku", "tags", "azure",
                                            "local", "region", "x"]), _docs, max_size=6))
def test_any_cluster_document_is_a_spec_or_one_config_error(doc, tmp_path_factory):
    import yaml

    from orchestrator.specs.cluster import load_cluster_spec
    path = tmp_path_factory.mktemp("p") / "c.yaml"
    path.write_text(yaml.safe_dump(doc))
    try:
        spec = load_cluster_spec(path)
    except ConfigError as exc:
        assert "\n" not in str(exc)
    else:
        assert 1 <= spec.nodes <= 100_000


@settings(max_examples=80, deadline=None)
@given(items=st.lists(st.tuples(st.sampled_from(["target", "threads", "max_steps", "nosuch", ""]),
                                st.text(max_size=12)), max_size=4))
def test_any_param_flags_are_typed_values_or_one_config_error(items):
    import math

    from orchestrator.cli.common import parse_params as _params
    from orchestrator.recipes.catalog import check_params, get_recipe
    recipe = get_recipe("smoke")
    try:
        params = check_params(recipe, _params([f"{k}={v}" for k, v in items]))
    except ConfigError as exc:
        assert "\n" not in str(exc)
    else:
        for key, value in params.items():
            default = recipe.params[key]
            assert type(value) is type(default) or (isinstance(default, float) and isinstance(value, float))
            assert not isinstance(value, float) or math.isfinite(value)


def test_dry_run_shows_the_script_with_the_params_applied(tmp_path):
    default = azbench_in_process("run", "smoke", "--dry-run", "--sku", "local", home=tmp_path / "h")
    assert default.code == 0, default.err
    assert "--target 0.87" in default.out and "--threads 1 " in default.out.replace("'", " ")
    given_ = azbench_in_process("run", "smoke", "--dry-run", "--sku", "local", "-p", "threads=3",
                                "-p", "target=0.5", "--nodes", "1,2", home=tmp_path / "h")
    assert given_.code == 0, given_.err
    assert given_.out.count("--target 0.5") == 2 and "--target 0.87" not in given_.out
    assert given_.out.count("--threads 3") == 2
    spec = tmp_path / "run.yaml"
    spec.write_text("recipe: smoke\ntime_limit_min: 7\nparams: {max_steps: 40}\n")
    from_file = azbench_in_process("run", "-f", str(spec), "--dry-run", "--sku", "local", home=tmp_path / "h")
    assert from_file.code == 0, from_file.err
    assert "--max-steps 40" in from_file.out and "#SBATCH --time=00:07:00" in from_file.out


# -- untrusted names (issue 39, point 12): names from folders and logs reach no terminal raw -----

ESCAPES = "\x1b[2J\x1b]0;TITLE\x07"  # clear the screen, set the window title
# short enough that `results list` keeps its system column at 100 columns
MARKUP = ("[b red]R[/b red]", "[link=x]c[/link]")
HTML = '<a href="javascript:alert(1)">x</a>|pipe'


def _crafted_tree(root: Path, platforms: tuple[str, ...]) -> Path:
    """A v5.1 submission whose system folder holds terminal escapes (a folder name may hold any
    byte but '/'), and a loose log per platform name, which the log itself gives."""
    import json as _json

    def ev(key: str, t: int, value: object = None, **meta: object) -> str:
        return ":::MLLOG " + _json.dumps({"namespace": "", "time_ms": t, "event_type": "POINT_IN_TIME",
                                          "key": key, "value": value, "metadata": meta}) + "\n"

    def log(platform: str, minutes: float) -> str:
        t0 = 1_700_000_000_000
        return (ev("submission_benchmark", t0, "bert") + ev("submission_platform", t0, platform)
                + ev("run_start", t0 + 1000) + ev("run_stop", t0 + 1000 + int(minutes * 60_000),
                                                  status="success"))
    bench = root / "v5.1" / "Org" / "results" / f"sys{ESCAPES}x" / "bert"
    bench.mkdir(parents=True)
    (bench / "result_0.txt").write_text(log("1xH100", 2.0))
    for n, platform in enumerate(platforms):
        loose = root / "v5.1" / f"loose{n}" / "bert"
        loose.mkdir(parents=True)
        (loose / "result_0.txt").write_text(log(platform, 3.0 + n))
    return root / "v5.1"


def _no_controls(*results: object) -> None:
    for result in results:
        assert result.code == 0, result.err  # type: ignore[attr-defined]
        for text in (result.out, result.err):  # type: ignore[attr-defined]
            assert not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f]", text), repr(text)


def test_crafted_names_reach_no_terminal_as_controls_or_markup(tmp_path: Path) -> None:
    home = tmp_path / "home"
    tree = _crafted_tree(tmp_path / "tree", MARKUP)
    imported = azbench_in_process("results", "import", "--no-compliance", str(tree), home=home)
    listed = azbench_in_process("results", "list", home=home)
    report = azbench_in_process("report", home=home)
    _no_controls(imported, listed, report)
    assert "sys[2J]0;TITLEx" in listed.out and "sys[2J]0;TITLEx" in report.out  # escapes gone
    assert "/sys[2J]0;TITLEx/bert/result_0.txt" in imported.err  # the warning's path, cleaned
    for markup in MARKUP:  # Rich would read it (red text, a link); the table prints it as written
        assert markup in listed.out, listed.out


def test_crafted_names_are_text_in_markdown(tmp_path: Path) -> None:
    home = tmp_path / "home"
    tree = _crafted_tree(tmp_path / "tree", (HTML, *MARKUP))
    imported = azbench_in_process("results", "import", "--no-compliance", str(tree), home=home)
    markdown = azbench_in_process("report", "--markdown", home=home)
    _no_controls(imported, markdown)
    assert '<a href' not in markdown.out
    assert '&lt;a href="javascript:alert(1)">x&lt;/a>\\|pipe' in markdown.out
    assert "\\[b red\\]R\\[/b red\\]" in markdown.out and "\\[link=x\\]c" in markdown.out


def test_a_sas_token_in_a_bad_account_url_is_not_repeated(tmp_path: Path) -> None:
    result = azbench_in_process("results", "push", "--account", "not a url?sv=2024&sig=SECRETSIG",
                                "--container", "c", home=tmp_path / "home")
    assert result.code == 2 and "SECRETSIG" not in result.err + result.out
    assert "?<redacted>" in result.err or "sig=<redacted>" in result.err, result.err


def test_the_error_handler_redacts_and_cleans_every_message() -> None:
    from orchestrator.safetext import clean, redact, shown
    assert redact("GET https://a.blob.core.windows.net/c?sv=1&sig=S%2B failed") == \
        "GET https://a.blob.core.windows.net/c?<redacted> failed"
    assert redact("token sig=abc&se=2 and signature=xyz") == \
        "token sig=<redacted>&se=2 and signature=<redacted>"
    assert clean(f"a{ESCAPES}b\tc\nd\u202ee\x9bf") == "a[2J]0;TITLEb c def"
    assert shown("x\x1b?sig=1") == "x?sig=<redacted>"
