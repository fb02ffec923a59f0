"""The evidence model: how reports become edge confidence."""
