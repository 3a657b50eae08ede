"""azbench: provision Azure GPU clusters, run MLPerf Training recipes, report scores and scaling."""

__version__ = "0.1.0"
