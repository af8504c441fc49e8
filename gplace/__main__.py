import sys

from gplace.cli import main

sys.exit(main())
