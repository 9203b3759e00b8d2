COPY spans TO '/tmp/x.csv'
