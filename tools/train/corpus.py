"""Seeded generator of simple children's stories (the training corpus).

Everything here is produced by a hand-written grammar, offline, from a random
seed, so the text is ours: the generated corpus is dedicated to the public
domain (CC0 1.0).  The same seed always gives the same text.

    /usr/bin/python3 tools/train/corpus.py --seed 1 --stories 5
"""
import argparse
import random

NAMES_F = ["Lily", "Mia", "Anna", "Sara", "Emma", "Lucy", "Ella", "Zoe", "Nina", "Rosa", "Amy", "Jane",
           "Daisy", "Ruby", "Grace", "Hannah", "Chloe", "Maya", "Olivia", "Sophie", "Kate", "Molly", "Alice", "Poppy"]
NAMES_M = ["Tom", "Ben", "Max", "Sam", "Leo", "Jack", "Tim", "Finn", "Omar", "Noah", "Joe", "Dan",
           "Oliver", "Henry", "Lucas", "Peter", "Charlie", "Oscar", "Felix", "Hugo", "Billy", "Jimmy", "Toby", "Ethan"]
ANIMALS = ["cat", "dog", "bird", "rabbit", "fox", "bear", "duck", "frog", "mouse", "owl", "pig", "horse",
           "lion", "turtle", "puppy", "kitten", "squirrel", "cow", "sheep", "goat", "elephant", "monkey",
           "tiger", "penguin", "dragon", "butterfly", "snail", "deer", "hedgehog", "chicken", "goose", "whale",
           "dolphin", "zebra", "giraffe", "beaver", "badger", "ladybug", "unicorn", "pony", "lamb", "raccoon"]
ANIMAL_ADJ = ["little", "big", "small", "fluffy", "brown", "white", "happy", "sleepy", "tiny", "old", "young", "funny",
              "gentle", "clever", "curious", "silly", "grumpy", "shy", "friendly", "noisy", "spotted", "striped"]
PLACES = ["park", "forest", "garden", "beach", "farm", "river", "lake", "hill", "town", "school", "market",
          "zoo", "library", "meadow", "playground", "kitchen", "village", "field", "mountain", "castle",
          "pond", "cave", "island", "bakery", "harbor", "orchard", "jungle", "desert", "city", "bridge",
          "museum", "station", "backyard", "valley", "swamp", "barn"]
OBJECTS = ["ball", "kite", "box", "book", "hat", "toy", "cake", "apple", "flower", "shell", "stone", "drum",
           "boat", "cup", "key", "map", "bell", "basket", "blanket", "sock", "star", "bike", "doll", "cookie",
           "balloon", "crayon", "pencil", "sandwich", "teddy bear", "umbrella", "necklace", "feather", "scarf",
           "candle", "puzzle", "robot", "train", "wagon", "jar", "ribbon", "button", "mirror", "whistle",
           "lantern", "picture", "pie", "banana", "carrot", "marble", "coin", "rope", "bucket"]
OBJ_ADJ = ["red", "blue", "green", "yellow", "shiny", "big", "small", "soft", "round", "new", "old", "pretty",
           "funny", "magic", "golden", "little", "purple", "orange", "pink", "tiny", "heavy", "special",
           "beautiful", "sparkly", "wooden", "striped", "favorite", "colorful", "silver", "strange", "warm"]
FEELINGS_GOOD = ["happy", "glad", "proud", "excited", "calm", "brave", "thankful", "cheerful", "joyful",
                 "grateful", "relieved", "delighted", "peaceful", "hopeful"]
FEELINGS_BAD = ["sad", "scared", "angry", "tired", "worried", "lonely", "upset", "confused", "nervous",
                "grumpy", "frightened", "unhappy", "bored", "embarrassed"]
WEATHER = ["sunny", "rainy", "windy", "cold", "warm", "bright", "cloudy", "quiet", "snowy", "foggy", "stormy",
           "hot", "lovely", "chilly"]
TIMES = ["One day", "One morning", "One evening", "Every day", "Later that day", "The next day",
         "One sunny day", "One rainy day", "After lunch", "In the morning"]
PLAY = ["play with", "look at", "share", "find", "carry", "hold", "clean", "paint", "draw", "hug", "show others", "keep", "polish", "sing to"]
MOVE = ["ran", "walked", "jumped", "hopped", "danced", "went", "skipped", "raced", "wandered", "marched",
        "strolled", "hurried", "rushed", "traveled", "climbed", "tiptoed", "flew", "swam"]
PROBLEMS = ["lost", "dropped", "could not find"]
SAYS = ["said", "asked", "shouted", "whispered", "replied", "called", "laughed", "smiled", "answered", "promised",
        "exclaimed", "giggled"]
LESSONS = ["It is good to share with friends.", "Being kind makes everyone happy.",
           "Friends help each other.", "It is okay to ask for help.", "Always tell the truth.",
           "Being brave is not so hard when a friend is near.", "A little care goes a long way.",
           "Saying sorry can fix a lot."]
ENDINGS = ["From that day on, {a} and {b} were best friends.", "They played together until the sun went down.",
           "Then they went home and had a big dinner.", "{a} smiled and went to sleep.",
           "It was the best day ever.", "{a} never forgot that day.", "And they all lived happily ever after.",
           "The end."]


class Story:
    def __init__(self, rng):
        self.r = rng

    def c(self, xs):
        return self.r.choice(xs)

    def article(self, word):
        return ("an " if word[0] in "aeiou" else "a ") + word

    def hero(self):
        r = self.r
        if r.random() < 0.6:
            female = r.random() < 0.5
            name = self.c(NAMES_F if female else NAMES_M)
            return {"name": name, "intro": self.c(["a little girl", "a girl", "a kind girl", "a small girl"]) if female
                    else self.c(["a little boy", "a boy", "a kind boy", "a small boy"]),
                    "he": "she" if female else "he", "his": "her" if female else "his",
                    "him": "her" if female else "him"}
        animal = self.c(ANIMALS)
        name = self.c(NAMES_F + NAMES_M)
        female = name in NAMES_F
        return {"name": name, "intro": self.article(self.c(ANIMAL_ADJ) + " " + animal),
                "animal": animal, "he": "she" if female else "he", "his": "her" if female else "his",
                "him": "her" if female else "him"}

    def friend(self, hero):
        r = self.r
        while True:
            f = self.hero()
            if f["name"] != hero["name"]:
                return f

    def generate(self):
        r = self.r
        h = self.hero()
        f = self.friend(h)
        obj = self.c(OBJ_ADJ) + " " + self.c(OBJECTS)
        place = self.c(PLACES)
        place2 = self.c([p for p in PLACES if p != place])
        good = self.c(FEELINGS_GOOD)
        bad = self.c(FEELINGS_BAD)
        N, He, his = h["name"], h["he"].capitalize(), h["his"]
        F = f["name"]
        s = []
        # opening
        k = r.random()
        if k < 0.55:
            s.append(f"Once upon a time, there was {h['intro']} named {N}.")
        elif k < 0.7:
            s.append(f"Once upon a time, in a small {self.c(['village', 'town', 'house', 'forest'])}, "
                     f"there lived {h['intro']} named {N}.")
        elif k < 0.85:
            s.append(f"There was once {h['intro']} called {N}.")
        elif k < 0.92 or "animal" not in h:
            s.append(f"{self.c(TIMES)}, {N} went to the {place}.")
        else:
            s.append(f"The {h['intro'].split(' ', 1)[1]} was called {N}.")
        # description
        if r.random() < 0.7:
            s.append(self.c([
                f"{He} liked to {self.c(PLAY)} {his} {obj}.",
                f"{He} loved the {place} very much.",
                f"{He} had {self.article(obj)} that {h['he']} loved.",
                f"{N} was always {good} and liked to help.",
                f"{He} was very {good} because it was {self.c(['a holiday', 'a new day', 'his birthday' if h['he'] == 'he' else 'her birthday', 'time to play'])}.",
                f"{He} lived near the {place} with {his} {self.c(['mom', 'dad', 'family', 'grandma', 'grandpa'])}.",
            ]))
        # setting
        s.append(f"{self.c(TIMES[:6] + TIMES[8:])}, it was {self.c(WEATHER)} and {N} {self.c(MOVE)} to the {place2}.")
        # conflict
        kind = r.randrange(6)
        if kind == 0:
            s.append(f"At the {place2}, {N} {self.c(PROBLEMS)} {his} {obj}.")
            s.append(f"{He} felt very {bad}.")
            s.append(f"\"Where is my {obj.split()[-1]}?\" {N} {self.c(['cried', 'asked', 'said'])}.")
            s.append(f"Then {F}, {f['intro']}, came by.")
            s.append(f"\"I can help you,\" {F} {self.c(SAYS)}.")
            s.append(f"They looked {self.c(['under a tree', 'behind a rock', 'in the grass', 'near the water', 'under a bench'])} "
                     f"and found the {obj.split()[-1]}.")
            s.append(f"{N} was so {good}. \"Thank you, {F}!\" {h['he']} said.")
        elif kind == 1:
            s.append(f"There {N} met {f['intro']} named {F}.")
            s.append(f"\"Do you want to play with me?\" {N} asked.")
            s.append(f"\"Yes, I do!\" {F} said with a big smile.")
            s.append(f"They {self.c(['played with', 'shared', 'took turns with'])} the {obj} "
                     f"and {self.c(['laughed a lot', 'had so much fun', 'ran in circles', 'sang a song'])}.")
            s.append(self.c([f"{N} felt {good} to have a new friend.",
                             f"{N} was very happy because {h['he']} had a new friend."]))
        elif kind == 2:
            s.append(f"{He} saw {self.article(self.c(ANIMAL_ADJ) + ' ' + self.c(ANIMALS))} that looked {bad}.")
            s.append(f"\"What is wrong?\" {N} asked.")
            s.append(f"\"I am {self.c(['hungry', 'lost', 'cold', 'stuck'])},\" it said.")
            s.append(f"{N} wanted to help, so {h['he']} {self.c(['gave it some food', 'showed it the way home', 'gave it a warm blanket', 'pulled it out'])}.")
            s.append(f"The animal was {good} and said, \"Thank you!\"")
            s.append(f"{N} felt {self.c(FEELINGS_GOOD)} because {h['he']} helped a friend.")
        elif kind == 3:
            food = self.c(["pancakes", "soup", "cookies", "a pie", "bread", "a cake", "pizza", "muffins", "salad", "noodles"])
            s.append(f"{N} and {F} wanted to make {food} for {self.c(['a party', 'their friends', 'mom', 'grandma', 'the teacher'])}.")
            s.append(f"They needed {self.c(['flour', 'eggs', 'milk', 'sugar', 'butter', 'honey'])} and "
                     f"{self.c(['apples', 'berries', 'cheese', 'tomatoes', 'carrots', 'chocolate', 'lemons'])}.")
            s.append(self.c([f"Oh no! {F} dropped the bowl and everything fell on the floor.",
                             f"Oh no! The oven was too hot and the {food.split()[-1]} got burned.",
                             f"But they could not find the big spoon anywhere."]))
            s.append(f"{N} felt {bad}, but {F} said, \"Do not worry. We can try again.\"")
            s.append(f"So they tried again, {self.c(['slowly and carefully', 'step by step', 'and this time they were careful'])}.")
            s.append(f"The {food.split()[-1]} {self.c(['tasted so good', 'was perfect', 'smelled wonderful'])}, and everyone was {good}.")
        elif kind == 4:
            s.append(f"Suddenly, the sky turned dark and a big storm came.")
            s.append(f"The wind was loud and the rain fell hard. {N} was {self.c(['scared', 'frightened', 'worried', 'nervous'])}.")
            s.append(f"{He} hid {self.c(['under a big tree', 'in a small cave', 'behind the barn', 'under a bridge'])} and waited.")
            s.append(f"Then {f['intro']} named {F} came to {h['him']} with {self.article(self.c(['umbrella', 'warm blanket', 'lantern', 'big coat']))}.")
            s.append(f"\"Come with me,\" {F} {self.c(SAYS)}. \"My home is close.\"")
            s.append(f"They sat by the fire and drank {self.c(['hot milk', 'warm tea', 'cocoa', 'soup'])} until the storm was over.")
            s.append(f"{N} was very {good} because {F} was so kind.")
        else:
            s.append(f"{He} wanted to {self.c(['climb', 'reach', 'see'])} the top of a big tree, but it was too high.")
            s.append(f"{N} felt {bad} and sat down.")
            s.append(f"{F} came and said, \"Let us try together.\"")
            s.append(f"They {self.c(['built a tall box tower', 'found a long ladder', 'worked as a team'])} "
                     f"and {self.c(['made it to the top', 'saw the whole ' + place2, 'reached the top'])}.")
            s.append(f"\"We did it!\" they {self.c(['shouted', 'said', 'cheered'])}.")
        # ending
        if r.random() < 0.4:
            s.append(self.c(LESSONS))
        s.append(self.c(ENDINGS).format(a=N, b=F))
        return " ".join(s)


def generate(seed, n):
    rng = random.Random(seed)
    st = Story(rng)
    return [st.generate() for _ in range(n)]


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--stories", type=int, default=5)
    a = ap.parse_args()
    for t in generate(a.seed, a.stories):
        print(t)
        print()
