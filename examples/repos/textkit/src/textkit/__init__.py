from textkit.words import frequencies, top_words, tokenize
from textkit.wrap import wrap
