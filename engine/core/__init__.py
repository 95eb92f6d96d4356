"""certa's numerical core."""
