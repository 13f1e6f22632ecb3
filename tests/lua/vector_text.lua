-- What every reader of tests/vectors/ needs from a line, in one place:
--   local text = dofile(folder .. "vector_text.lua")
--   text.words(line)   -- its words (runs of non-space), in order
local text = {}

function text.words(line)
   local words = {}
   for word in line:gmatch("%S+") do
      words[#words + 1] = word
   end
   return words
end

return text
