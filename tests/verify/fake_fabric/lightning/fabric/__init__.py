from lightning.fabric.fabric import Fabric

__all__ = ["Fabric"]
