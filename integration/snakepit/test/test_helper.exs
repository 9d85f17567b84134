# The soak (test/soak, minutes long) and the chaos scenarios on a pool of two (RealClient.ChaosPairTest,
# which Snakepit 0.13 cannot survive yet) run only when asked: scripts/soak.sh,
# scripts/realclient_test.sh --only chaos.
ExUnit.configure(exclude: [:soak, :chaos])
ExUnit.start()
