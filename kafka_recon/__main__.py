"""`python -m kafka_recon`: the command line, as `kafka-recon`."""

from kafka_recon.faces.cli import main

raise SystemExit(main())
