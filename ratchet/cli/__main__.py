from ratchet.cli.main import main

main()
