SELECT count(*) FROM spans a, spans b, spans c, spans d, spans e, spans f, spans g
