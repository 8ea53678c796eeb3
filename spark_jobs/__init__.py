"""PySpark jobs, each submitted by spark-submit: argument parser, pure transforms, main."""
