"""``python -m dpkps_core`` entry point."""

from dpkps_core.cli import main

raise SystemExit(main())
