"""The torch.export front end."""
