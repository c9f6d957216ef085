from slot_expiration.cli.app import main

main()
