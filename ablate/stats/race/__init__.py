"""The race: the screened leaders raced block by block, the stop, the confirmation and the finalists."""
