from .gsnet_loss import GSNetLoss

__all__ = ['GSNetLoss']
