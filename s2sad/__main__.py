import sys

from s2sad.cli import main

sys.exit(main())
