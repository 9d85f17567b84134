defmodule RealClient.LauncherRecipeTest do
  @moduledoc "The README's launcher recipe: Snakepit's own adapter, its Python replaced by scripts/snakepit-python."
  use RealClient.RecipeCase, recipe: :launcher
end
