# The soak (test/soak, minutes long) runs only when asked: scripts/soak.sh (`mix test --only soak`).
ExUnit.configure(exclude: [:soak])
ExUnit.start()
