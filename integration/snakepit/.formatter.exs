[inputs: ["{mix,.formatter}.exs", "{config,test}/**/*.{ex,exs}"]]
