"""The commands layer: modules here parse arguments and call the libraries below; nothing imports them."""
