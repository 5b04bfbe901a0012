"""Benign text of the kinds an agent's memory holds, written for this project (MIT, like it).

The public injection corpora come with few benign texts, and none of the friendly
second-person talk a conversation memory is full of ("your garden looks great", "could you
tell me more about your trip?"). A detector trained without it takes every "your" for an
attack. These sentences are generated from our own templates and word lists, seeded, so the
training set is the same on every run: friendly chat between two people, notes an agent keeps
about its user and its work, an agent's persona as SOUL.md states it, and ordinary requests to
an assistant. A few hand-written lines
per language cover the languages of the attack corpora that the ChatterBot corpus (the other
benign source, BSD-3-Clause) lacks.

None of it is evaluation data: the detector's false positives are measured on LoCoMo's turns
and the ledgers' titles, which it never trains on.
"""

from __future__ import annotations

import random

NAMES = ["Anna", "Ben", "Chloe", "Dev", "Elena", "Farid", "Grace", "Hiro", "Isla", "Jonas", "Kemi", "Luis",
         "Mara", "Nate", "Olga", "Priya", "Quinn", "Rosa", "Sam", "Tariq", "Uma", "Victor", "Wen", "Yara", "Zoe"]
PEOPLE = ["my sister", "my brother", "my mom", "my dad", "my grandma", "my best friend", "my neighbour", "my kids",
          "my partner", "my coworker", "my cousin", "my roommate", "my daughter", "my son", "my team", "my aunt"]
PLACES = ["the lake", "Lisbon", "the farmers market", "my aunt's place", "the mountains", "the beach", "Kyoto",
          "the new cafe downtown", "the art museum", "the park", "Mexico City", "the climbing gym", "the library",
          "a tiny village in Scotland", "the zoo", "the countryside", "the conference in Berlin", "the bookstore"]
ACTIVITIES = ["painting", "running", "baking sourdough", "learning the guitar", "gardening", "pottery", "hiking",
              "volunteering at the shelter", "writing poems", "photography", "playing chess", "swimming", "yoga",
              "knitting", "rock climbing", "cooking Thai food", "birdwatching", "salsa dancing", "woodworking",
              "studying Spanish", "coaching the kids' soccer team", "restoring an old bike", "camping"]
THINGS = ["garden", "painting", "new apartment", "dog", "cat", "project", "store", "band", "blog", "cake",
          "photos", "kitchen", "shoes", "book club", "podcast", "bike", "startup", "workshop", "poster", "recipe",
          "art", "collection", "plan", "speech", "community group", "shelter", "family", "car", "trip", "class"]
ADJECTIVES = ["amazing", "so cool", "beautiful", "really inspiring", "great", "lovely", "awesome", "impressive",
              "so cozy", "wonderful", "fantastic", "adorable", "gorgeous", "stunning", "super fun"]
FEELINGS = ["excited", "nervous", "proud", "tired but happy", "grateful", "a bit stressed", "relieved", "thrilled",
            "homesick", "motivated", "overwhelmed", "calm", "hopeful", "so happy"]
TIMES = ["yesterday", "last weekend", "this morning", "last month", "a few days ago", "on Friday", "last summer",
         "two weeks ago", "over the holidays", "tonight", "next week", "this weekend", "in May"]
TOPICS = ["mental health", "climate change", "adoption", "running a small business", "parenting",
          "moving to a new city", "career changes", "staying healthy", "community work", "saving money",
          "learning a language", "grief", "friendship", "self-care", "education", "animal rescue"]

CHAT = [
    "Hey {name}! How have you been? It's been ages.",
    "Hi {name}, good to hear from you! {time} I went to {place} with {person}.",
    "Your {thing} looks {adj}! How long did it take you?",
    "Thanks, {name}! Your support means a lot to me.",
    "I really appreciate your help with the {thing}.",
    "Could you tell me more about your {thing}?",
    "What inspired you to start {activity}?",
    "That's {adj}, {name}! I'm so proud of you.",
    "I've been {feeling} about {topic} lately.",
    "{time} I finally started {activity}, and I love it.",
    "Wow, your {thing} is {adj}. Did you do it all yourself?",
    "Thanks for sharing your story, it really helps to hear your perspective on {topic}.",
    "Good luck with your {thing}! Let me know how it goes.",
    "I can't wait to see your {thing} next time.",
    "Do you have any plans for {time}?",
    "We went to {place} {time}; {person} loved it.",
    "Keep up the great work with your {thing}, {name}!",
    "It sounds like your hard work is paying off.",
    "Take care of yourself, and say hi to {person} for me!",
    "Let's keep supporting each other, we've got this.",
    "Your kindness makes a real difference in your community.",
    "Have you thought about trying {activity}? It helps me relax.",
    "I just got back from {place}, it was {adj}.",
    "How's your {thing} going? Last time you mentioned it was tough.",
    "Enjoy your time with {person}, {name}!",
    "Sounds like you had a blast at {place}!",
    "That reminds me of when {person} and I went to {place}.",
    "I joined a group about {topic}, and the people there are {adj}.",
    "Want to share some photos of your {thing} with me?",
    "Your advice about {topic} really stuck with me.",
    "I'm {feeling}, {person} is visiting {time}.",
    "Congrats on your {thing}! You deserve it.",
    "What's the best part of {activity} for you?",
    "Let me know if you need anything, I'm always here for you.",
    "Can you believe it's already been a year since we met at {place}?",
    "I tried your {thing} idea and it worked out really well.",
    "By the way, look at this picture from {place}!",
    "Honestly, {activity} has changed my life.",
    "Did you end up going to {place} {time}?",
    "I'm thinking about {topic} a lot after our last talk.",
]

# Advice and encouragement between friends: imperative, second person, and benign.
ADVICE = [
    "Make sure you take breaks when {activity} gets intense.",
    "Do your research before you commit to {topic}, and ask people who have done it.",
    "Don't be afraid to share your {thing}, even if it's not perfect yet.",
    "Try {activity} for a month and see how you feel.",
    "Remember to be kind to yourself while you deal with {topic}.",
    "It's important to celebrate the small wins with your {thing}.",
    "Keep going, {name}! You have so much potential.",
    "Whatever happens, finish your {thing}; you'll be glad you did.",
    "Just stay positive, the important thing is that you tried.",
    "Look for people who share your passion for {activity}.",
    "Practise a little every day and show your {thing} to a friend for feedback.",
    "If you team up with someone for the {thing}, pick a person you trust.",
    "Start small with {activity}, then build up slowly.",
    "Talk to {person} about it, they always give good advice.",
    "Write down what you learn about {topic} so you can look back on it.",
    "Take it one step at a time; you'll figure out your {thing}.",
    "We should check in on each other every week and keep at it.",
    "Find a routine that works for you and stick with it.",
]

# How people tell what happened and how it felt: first person, past tense, reflective.
STORIES = [
    "Spending the day at {place} felt like a little holiday from everything.",
    "I realized how important {topic} is to me after talking with {person}.",
    "{time} was rough, but {person} helped me get through it.",
    "Our two rabbits are chaos, but the kids adore them.",
    "Teaching {activity} to beginners turned out to be the best part of my week.",
    "Volunteering taught me a lot about {topic} and about myself.",
    "The festival at {place} was packed and everyone was dancing.",
    "I made a little {thing} to remind myself to stay hopeful.",
    "It's been a crazy year with the move, the new job and {activity}.",
    "Standing on that hill near {place} made all my worries feel small.",
    "Exactly, {name}, that matters a lot to me too.",
    "Same here, {name}. {activity} is where I feel most like me.",
    "Wow, {name}, that sounds tough. Is there anything I can do?",
    "I signed up for a {activity} contest and I'm already nervous!",
]

NOTES = [
    "The user prefers short answers in the morning.",
    "{name} lives near {place} and likes {activity}.",
    "{name}'s birthday is in {month}; {person} is planning a party.",
    "Remind me to call {person} on {day}.",
    "Remember that {name} is allergic to peanuts.",
    "I prefer {activity} over {activity2} on weekends.",
    "The user wants weekly summaries of {topic} news.",
    "{name} started {activity} {time}.",
    "Meeting with {name} moved to {day} at 3 pm.",
    "The user's favourite place is {place}.",
    "Decided to use Postgres for the {thing} service; SQLite could not keep up.",
    "Lesson: run the migrations before restarting the workers.",
    "The deploy of the {thing} API runs every {day} after the backup.",
    "Build failed because the cache was stale; clearing it fixed it.",
    "{name} asked for the report in PDF, not Word.",
    "Prefers replies in plain English without jargon.",
    "Always double-check the time zone when scheduling with {name}.",
    "Commitment: finish the {thing} draft by {day}.",
    "Project {project}: the staging host is slow on Mondays.",
    "The user is learning Spanish and likes practising with simple phrases.",
    "{name} said the instructions for the {thing} were confusing; rewrite them.",
    "Next time, answer with a table when {name} asks for a comparison.",
    "The previous version of the script ignored empty lines; the new one keeps them.",
    "Ignore the old build logs; the new pipeline writes them elsewhere.",
    "The system runs Debian 12 with 8 GB of RAM.",
    "Note: the password policy requires 12 characters and a number.",
    "The assistant should keep the weekly summary under 200 words.",
    "The user's role is now team lead for {project}.",
]

# Notes about credentials and about instructions that are not attacks: how an agent writes
# down where a secret lives, what a config line means, which old step to skip.
TECH = [
    "The {service} password lives in the team vault under ops/{service}.",
    "Reset {name}'s password from the admin page; the old one expired.",
    "Password rotation for {service} is due every 90 days.",
    "The login form has a username field, a password field and a remember-me box.",
    "{service}_password is read from the environment, never from the repo.",
    "Set the token in the CI settings, not in the workflow file.",
    "The API key for {service} is in the secrets manager; ask {name} for access.",
    "user.set_password(new_password) hashes it before saving.",
    "if not token: raise AuthError('missing token')",
    "api_key = os.environ['{service_upper}_API_KEY']",
    "password: stored in 1Password under {service}",
    "The {service} config has password: null until the vault is wired up.",
    "Ignore the warnings from the old linter; they were fixed upstream.",
    "Skip the previous migration step if the table already exists.",
    "The previous instructions in the wiki are out of date; follow the runbook instead.",
    "Ignore the stale lock file after a crash and start the job again.",
    "Ignore the earlier build logs, they came from the old runner.",
    "Ignore the previous test results: the fixture was broken that day.",
    "The previous release notes ignored the migration; add it to the next ones.",
    "db_password = settings.get('{service}_password') and never logged.",
    "if new_password != repeat_password: show the mismatch error.",
    "token = request.headers.get('Authorization') is checked before anything else.",
    "Disregard the earlier estimate for {project}, the scope changed.",
    "The system prompt for the support bot lives in prompts/support.md.",
    "Forget the old staging URL, everything moved to the new cluster.",
    "Override the default timeout with --timeout 30 when the network is slow.",
    "The assistant mode in the editor completes whole functions.",
    "Developer mode on the phone is needed to install the test build.",
    "Act as the reviewer for {name}'s pull request while they are away.",
    "From now on, the weekly report goes out on {day} instead of Friday.",
    "You are now the owner of the {service} on-call rotation.",
    "Respond to {name}'s email about the {thing} before {day}.",
]

# What SOUL.md holds: an agent's persona, in the second person, as Hermes' own template writes it.
PERSONA = [
    "You are {agent}, a {trait} assistant for the {team} team.",
    "You are {agent}. You help {name} with {project} and keep notes of every decision.",
    "You answer in plain words and keep replies short.",
    "You prefer small, reversible changes and say so when a change is risky.",
    "You ask before running anything that deletes data.",
    "Your tone is {tone}; you never pretend to know what you don't.",
    "You speak {language} with {name} and English in code reviews.",
    "You are a {trait} helper who explains the why before the how.",
    "When unsure, you say \"I don't know\" and suggest where to look.",
    "You write commit messages in the imperative mood.",
    "You care about accessibility and test every page with a screen reader.",
    "You remind {name} to take breaks during long debugging sessions.",
    "You are the on-call assistant for {service}; you page a human for anything irreversible.",
    "You answer questions about {topic} with sources when you can.",
    "You keep the {project} roadmap up to date after each planning meeting.",
    "Rule: answer calmly and check the facts before saying anything about {topic}.",
    "Always check the facts before answering questions about {topic}.",
    "Answer in short paragraphs and say which source you used.",
    "Never guess a date; look it up in the calendar before replying.",
    "Before saying anything about {project}, read the latest notes.",
    "Reply to {name} in {language} unless they write in English.",
    "Value {n}: be honest about what you do not know.",
    "Principle {n}: ask before deleting anything.",
]
AGENTS = ["Hermes", "Atlas", "Juniper", "Orion", "Pixel", "Sage", "Tally", "Wren"]
TRAITS = ["careful", "friendly", "patient", "precise", "calm", "practical", "curious", "thorough"]
TEAMS = ["platform", "data", "support", "design", "infrastructure", "mobile", "research", "security"]
TONES = ["warm but direct", "calm and plain", "friendly and brief", "formal", "light-hearted"]
LANGUAGES = ["Spanish", "German", "French", "Portuguese", "Japanese", "Hindi"]

SERVICES = ["postgres", "redis", "grafana", "jenkins", "mailgun", "stripe", "sentry", "jira", "vault", "minio"]

REQUESTS = [
    "Can you summarize this article about {topic}?",
    "Please translate this note into French for {name}.",
    "Write a short poem about {activity}.",
    "What's a good recipe for dinner tonight?",
    "Help me plan a trip to {place}.",
    "Give me three ideas for {person}'s birthday.",
    "How do I get better at {activity}?",
    "Could you draft an email to {name} about the {thing}?",
    "Explain {topic} in simple words.",
    "Make a shopping list for the weekend.",
    "What did we decide about the {thing} last week?",
    "Tell me a fun fact about {place}.",
    "Remind me what {name} said about {topic}.",
]

MONTHS = ["January", "March", "May", "July", "September", "November"]
DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
PROJECTS = ["apollo", "atlas", "harbor", "lumen", "orchid", "pioneer"]

# Hand-written lines in the attack corpora's languages that the ChatterBot corpus lacks or
# holds little of: everyday chat and notes, so a language is never evidence by itself.
OTHER_LANGUAGES = [
    # Vietnamese
    "Chào bạn! Hôm qua mình đi chợ với mẹ.", "Khu vườn của bạn đẹp quá!", "Cảm ơn bạn đã giúp đỡ mình.",
    "Cuối tuần này bạn có kế hoạch gì không?", "Mình đang học nấu món Thái.", "Em gái tôi sống ở Đà Nẵng.",
    "Người dùng thích câu trả lời ngắn gọn.", "Nhớ gọi cho bà vào chủ nhật nhé.",
    "Hôm nay trời mưa nên chúng tôi ở nhà xem phim.", "Con trai tôi vừa vào lớp một.", "Tôi thích uống cà phê sữa đá buổi sáng.",
    "Cuối tuần trước cả nhà đi Vũng Tàu.", "Bạn nấu món phở ngon quá!", "Tháng sau tôi sẽ chuyển đến Hà Nội.",
    "Ông bà tôi sống ở quê, gần cánh đồng lúa.", "Mình mới mua một chiếc xe đạp mới.", "Chúc mừng sinh nhật bạn nhé!",
    "Ngày mai mình đi khám răng lúc chín giờ.", "Cô ấy làm giáo viên ở trường tiểu học.", "Chúng ta gặp nhau ở quán cũ nhé.",
    # Tagalog
    "Kumusta ka na? Matagal na tayong hindi nagkita.", "Ang ganda ng hardin mo!", "Salamat sa tulong mo kahapon.",
    "Pumunta kami sa dagat noong Sabado.", "Mahilig siyang magluto ng adobo.", "Paalalahanan mo ako na tawagan si nanay.",
    "Gusto ng user ang maiikling sagot.", "Ano ang plano mo ngayong katapusan ng linggo?",
    "Umuulan ngayon kaya nanonood kami ng pelikula sa bahay.", "Unang baitang na ang anak ko.", "Gusto kong uminom ng kape sa umaga.",
    "Lilipat kami sa Cebu sa susunod na buwan.", "Maligayang kaarawan, kaibigan!", "Ang sarap ng luto mo!",
    # Arabic
    "مرحبا! كيف حالك؟ اشتقت إليك.", "حديقتك جميلة جدا!", "شكرا لمساعدتك يا صديقي.", "ذهبنا إلى البحر يوم السبت.",
    "أختي تعيش في القاهرة وتعمل ممرضة.", "يفضل المستخدم الإجابات القصيرة.", "تذكر أن تتصل بأمك يوم الأحد.",
    "ما هي خططك لعطلة نهاية الأسبوع؟",
    "اليوم تمطر، لذلك نشاهد فيلما في البيت.", "ابني دخل الصف الأول هذا العام.", "أحب شرب القهوة في الصباح.",
    "الشهر القادم سننتقل إلى عمّان.", "عيد ميلاد سعيد يا صديقي!", "طبخك لذيذ جدا.",
    # Russian
    "Привет! Как дела? Давно не виделись.", "Твой сад выглядит чудесно!", "Спасибо за помощь с переездом.",
    "Вчера мы ходили в парк с детьми.", "Моя сестра живёт в Казани.", "Пользователь любит короткие ответы.",
    "Напомни мне позвонить маме в воскресенье.", "Какие у тебя планы на выходные?",
    # Thai
    "สวัสดีครับ สบายดีไหม", "สวนของคุณสวยมาก", "ขอบคุณที่ช่วยเหลือนะ", "เมื่อวานเราไปทะเลกับครอบครัว",
    "ผู้ใช้ชอบคำตอบสั้นๆ", "อย่าลืมโทรหาแม่วันอาทิตย์", "สุดสัปดาห์นี้คุณมีแผนอะไรไหม", "น้องสาวของฉันอาศัยอยู่ที่เชียงใหม่",
    "วันนี้ฝนตก เราเลยอยู่บ้านดูหนัง", "ลูกชายของฉันเพิ่งเข้าเรียนชั้นประถมหนึ่ง", "ฉันชอบดื่มกาแฟเย็นตอนเช้า",
    "เดือนหน้าฉันจะย้ายไปกรุงเทพ", "คุณทำต้มยำอร่อยมาก", "พ่อกับแม่ไปเที่ยวเชียงรายเมื่อวาน", "พรุ่งนี้ฉันมีนัดหมอฟันตอนเก้าโมง",
    "เราเจอกันที่ร้านเดิมนะ", "สุขสันต์วันเกิดนะเพื่อน", "น้องหมาของเราชอบวิ่งเล่นในสวน", "ช่วงนี้งานยุ่งมากแต่ก็สนุกดี",
    # Bengali
    "হ্যালো! কেমন আছো?", "তোমার বাগানটা খুব সুন্দর!", "সাহায্যের জন্য ধন্যবাদ।", "গতকাল আমরা পার্কে গিয়েছিলাম।",
    "ব্যবহারকারী ছোট উত্তর পছন্দ করেন।", "রবিবার মাকে ফোন করতে মনে করিয়ে দিও।",
    "আজ বৃষ্টি হচ্ছে, তাই আমরা বাড়িতে সিনেমা দেখছি।", "আমার ছেলে প্রথম শ্রেণিতে ভর্তি হয়েছে।", "সকালে চা খেতে আমার ভালো লাগে।",
    "আগামী মাসে আমরা ঢাকায় যাব।", "শুভ জন্মদিন, বন্ধু!", "তোমার রান্না খুব সুস্বাদু হয়েছে।",
    # Hindi
    "नमस्ते! आप कैसे हैं?", "आपका बगीचा बहुत सुंदर है!", "मदद के लिए धन्यवाद।", "कल हम परिवार के साथ पार्क गए थे।",
    "उपयोगकर्ता को छोटे जवाब पसंद हैं।", "रविवार को माँ को फोन करना याद दिलाना।", "इस सप्ताहांत आपकी क्या योजना है?",
    "आज बारिश हो रही है, इसलिए हम घर पर फिल्म देख रहे हैं।", "मेरा बेटा पहली कक्षा में गया है।", "सुबह चाय पीना मुझे अच्छा लगता है।",
    "अगले महीने हम दिल्ली जाएंगे।", "जन्मदिन मुबारक हो, दोस्त!", "तुम्हारा खाना बहुत स्वादिष्ट था।",
    # Turkish
    "Merhaba! Nasılsın? Uzun zamandır görüşmedik.", "Bahçen çok güzel görünüyor!", "Yardımın için teşekkürler.",
    "Dün ailemle sahile gittik.", "Kullanıcı kısa cevapları tercih ediyor.", "Pazar günü annemi aramayı hatırlat.",
    # Indonesian
    "Halo! Apa kabar? Lama tidak bertemu.", "Kebunmu indah sekali!", "Terima kasih atas bantuanmu.",
    "Kemarin kami pergi ke pantai bersama keluarga.", "Pengguna lebih suka jawaban singkat.",
    "Ingatkan aku untuk menelepon ibu hari Minggu.",
    # German
    "Hallo! Wie geht es dir? Lange nicht gesehen.", "Dein Garten sieht wunderschön aus!", "Danke für deine Hilfe beim Umzug.",
    "Gestern waren wir mit den Kindern im Zoo.", "Der Nutzer bevorzugt kurze Antworten.", "Erinnere mich daran, Oma am Sonntag anzurufen.",
    "Was hast du am Wochenende vor?", "Meine Schwester wohnt in Hamburg und arbeitet als Ärztin.",
    # Spanish
    "¡Hola! ¿Cómo estás? Hace mucho que no hablamos.", "¡Tu jardín se ve precioso!", "Gracias por tu ayuda con la mudanza.",
    "Ayer fuimos a la playa con mis primos.", "El usuario prefiere respuestas cortas.", "Recuérdame llamar a mi madre el domingo.",
    "¿Qué planes tienes para el fin de semana?", "Mi hermana vive en Sevilla y trabaja de enfermera.",
    # French
    "Salut ! Comment vas-tu ? Ça fait longtemps.", "Ton jardin est magnifique !", "Merci pour ton aide avec le déménagement.",
    "Hier, nous sommes allés au marché avec ma grand-mère.", "L'utilisateur préfère les réponses courtes.",
    "Rappelle-moi d'appeler maman dimanche.", "Qu'est-ce que tu fais ce week-end ?",
    # Italian
    "Ciao! Come stai? È da tanto che non ci sentiamo.", "Il tuo giardino è bellissimo!", "Grazie per il tuo aiuto.",
    "Ieri siamo andati al mare con la famiglia.", "L'utente preferisce risposte brevi.", "Ricordami di chiamare la nonna domenica.",
    # Portuguese
    "Olá! Tudo bem? Faz tempo que não nos falamos.", "Seu jardim está lindo!", "Obrigado pela sua ajuda com a mudança.",
    "Ontem fomos à praia com os meus primos.", "O usuário prefere respostas curtas.", "Lembre-me de ligar para minha mãe no domingo.",
    # Chinese
    "你好!好久不见,最近怎么样?", "你的花园真漂亮!", "谢谢你帮我搬家。", "昨天我们和家人去了海边。",
    "用户喜欢简短的回答。", "提醒我星期天给妈妈打电话。", "这个周末你有什么计划?", "我妹妹住在上海,是一名护士。",
    # Japanese
    "こんにちは!お元気ですか?", "あなたの庭はとてもきれいですね!", "手伝ってくれてありがとう。", "昨日、家族と海に行きました。",
    "ユーザーは短い返事を好みます。", "日曜日に母に電話するよう思い出させて。", "週末の予定は何ですか?",
    # Korean
    "안녕하세요! 잘 지내셨어요?", "정원이 정말 예쁘네요!", "도와줘서 고마워요.", "어제 가족과 바다에 갔어요.",
    "사용자는 짧은 답변을 좋아합니다.", "일요일에 엄마에게 전화하라고 알려줘.", "이번 주말에 무슨 계획 있어요?",
]


def _fill(template: str, rng: random.Random) -> str:
    activity, activity2 = rng.sample(ACTIVITIES, 2)
    return template.format(name=rng.choice(NAMES), person=rng.choice(PEOPLE), place=rng.choice(PLACES),
                           activity=activity, activity2=activity2, thing=rng.choice(THINGS),
                           adj=rng.choice(ADJECTIVES), feeling=rng.choice(FEELINGS), time=rng.choice(TIMES),
                           topic=rng.choice(TOPICS), month=rng.choice(MONTHS), day=rng.choice(DAYS),
                           project=rng.choice(PROJECTS), service=(service := rng.choice(SERVICES)),
                           agent=rng.choice(AGENTS), trait=rng.choice(TRAITS), team=rng.choice(TEAMS),
                           tone=rng.choice(TONES), language=rng.choice(LANGUAGES), n=rng.randint(1, 12),
                           service_upper=service.upper())


def sentences(count: int = 6000, seed: int = 20261202) -> list[str]:
    """`count` benign texts: chat (most), notes and requests, some joined into longer turns,
    then the hand-written lines in other languages; the same on every call with one seed."""
    rng = random.Random(seed)
    out: list[str] = []
    pools = [(CHAT, 0.32), (ADVICE, 0.13), (STORIES, 0.13), (NOTES, 0.13), (TECH, 0.1), (PERSONA, 0.1),
             (REQUESTS, 0.09)]
    while len(out) < count:
        parts = []
        for _ in range(rng.choice((1, 1, 1, 2, 2, 3))):
            pool = rng.choices([p for p, _ in pools], [w for _, w in pools])[0]
            parts.append(_fill(rng.choice(pool), rng))
        out.append(" ".join(parts))
    return sorted(set(out)) + OTHER_LANGUAGES
