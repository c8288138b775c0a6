from platformio.public import PlatformBase


class QemucortexmPlatform(PlatformBase):
    pass
