SELECT length(repeat('x', 2147483647))
