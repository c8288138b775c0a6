"""Stand-in for PlatformIO's tool-scons package: runs the SCons installed with pip."""
import sys

from SCons.Script.Main import main

if __name__ == "__main__":
    sys.exit(main())
