defmodule RealClient.AdapterRecipeTest do
  @moduledoc "The README's adapter-module recipe: MyApp.CompilationBridgeAdapter over Snakepit's gRPC adapter."
  use RealClient.RecipeCase, recipe: :adapter
end
