"""What every stage uses: the dtype table, atomic file writing, progress bars."""
