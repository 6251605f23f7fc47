"""CLI room ``measure``: sweep a device with fio (one host or many), and make a reference device."""
