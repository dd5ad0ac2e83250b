"""``python -m spark_lag_assign.cli``: the same command line as ``spark-lag-assign``."""

from spark_lag_assign.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
